"""Fuzz tests (issue 9): corpus loaders, the engine round trip and the URL typer.

Three properties, on generated inputs (hypothesis, derandomized: the same inputs every run):

* **loaders** — a generated JSONL or CSV file (valid records, random JSON values nested up to
  60 levels, strings with control characters, invalid UTF-8 bytes, wrongly typed ids / texts /
  dates, ``NaN``; lines ending in ``\\n``, ``\\r\\n`` or a lone ``\\r``) yields exactly one
  ``Document`` or one ``Reject`` per physical record and raises nothing;
* **engine round trip** — the documents the reader accepts (random JSON ``extra`` fields) are
  indexed into an Edge store, the store is closed and reopened, and every one is found;
* **URL typer** — random URLs and text never raise; a scheme other than http(s) is ``unknown``.

The check functions return what went wrong instead of asserting, so that
``bench/scripts/fuzz_report.py`` runs the same generators and checks with a larger budget and
counts failures rather than stopping at the first.
"""

from __future__ import annotations

import csv
import io
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from credrank.documents.readers import CorpusError, Reject, iter_documents, read_corpus
from credrank.documents.schema import DATE_FIELDS
from credrank.index import open_store
from credrank.index.embed import HashingEmbedder
from credrank.index.ingest import index_documents
from credrank.provenance import SourceTyper

MAX_DEPTH = 60
TERMINATORS = ("\n", "\r\n", "\r")
SCHEMA_KEYS = frozenset({"id", "_id", "text", "title", "url", "source_id", "source_type",
                         "cites", *DATE_FIELDS})
HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

# --------------------------------------------------------------------------- generators

# text with control characters (C0, DEL, C1, line/paragraph separators), no surrogates
control_text = st.text(
    alphabet=st.one_of(st.characters(codec="utf-8"),
                       st.sampled_from("\x00\x01\x07\x08\t\n\x0b\x0c\r\x1b\x1f\x7f\x85"
                                       "\u2028\u2029\ufeff")),
    max_size=30)
scalars = st.one_of(st.none(), st.booleans(), st.integers(), control_text,
                    st.floats(allow_nan=True, allow_infinity=True))


@st.composite
def deep_values(draw: st.DrawFn) -> Any:
    """A value nested ``depth`` levels (0-60) of alternating lists and objects."""
    depth = draw(st.integers(0, MAX_DEPTH))
    v: Any = draw(scalars)
    for i in range(depth):
        v = [v] if i % 2 else {"k": v}
    return v


json_values = st.one_of(
    deep_values(),
    st.recursive(scalars, lambda kids: st.one_of(
        st.lists(kids, max_size=4), st.dictionaries(control_text, kids, max_size=4)),
        max_leaves=12),
)
ids = st.one_of(st.text(min_size=1, max_size=12), st.integers(-10, 10**6))
dates = st.one_of(st.sampled_from(["2023-05-01", "2023-05-01T10:00:00Z",
                                   "2023-05-01T10:00:00+02:00", "2023-05-01T10:00:00"]),
                  control_text)
extra_keys = control_text.map(lambda s: "x_" + s)


@st.composite
def valid_records(draw: st.DrawFn) -> dict[str, Any]:
    rec: dict[str, Any] = {"id": draw(ids), "text": draw(control_text) + "word"}
    if draw(st.booleans()):
        rec["url"] = draw(st.one_of(st.just("https://www.cdc.gov/flu"), control_text))
    if draw(st.booleans()):
        rec[draw(st.sampled_from(DATE_FIELDS))] = draw(dates)
    rec.update(draw(st.dictionaries(extra_keys, json_values, max_size=3)))
    return rec


@st.composite
def wrong_records(draw: st.DrawFn) -> dict[str, Any]:
    """A record with one or more fields of random type (often wrong)."""
    rec = draw(valid_records())
    for key in draw(st.lists(st.sampled_from(["id", "text", "title", "url", "cites",
                                              "source_type", *DATE_FIELDS]), max_size=3)):
        rec[key] = draw(json_values)
    return rec


def _json_line(value: Any, ascii_only: bool) -> bytes:
    text = json.dumps(value, ensure_ascii=ascii_only)  # NaN/Infinity written as such
    return text.encode("utf-8", "surrogatepass")


@st.composite
def jsonl_lines(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["valid", "wrong", "value", "junk", "bytes"]))
    ascii_only = draw(st.booleans())
    if kind == "valid":
        line = _json_line(draw(valid_records()), ascii_only)
    elif kind == "wrong":
        line = _json_line(draw(wrong_records()), ascii_only)
    elif kind == "value":
        line = _json_line(draw(json_values), ascii_only)
    elif kind == "junk":
        line = draw(control_text).encode("utf-8")
    else:
        line = draw(st.binary(max_size=40))
    if line and draw(st.integers(0, 4)) == 0:  # invalid UTF-8 somewhere in the line
        at = draw(st.integers(0, len(line)))
        line = line[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\x80", b"\xed\xa0\x80"])
                                ) + line[at:]
    return line


@st.composite
def jsonl_files(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(jsonl_lines(), max_size=8))
    ends = [draw(st.sampled_from(TERMINATORS)).encode() for _ in lines]
    body = b"".join(line + end for line, end in zip(lines, ends, strict=True))
    if body and draw(st.booleans()):
        body = body.rstrip(b"\r\n")  # no line end after the last record
    return body


def jsonl_records(data: bytes) -> int:
    """Physical records of a JSONL file: non-blank universal-newline lines (BOM ignored)."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return sum(1 for line in data.splitlines() if line.strip())


CSV_OPTIONAL = ("url", "title", "published_at", "cites", "source_type", "x_note")


@st.composite
def csv_files(draw: st.DrawFn) -> tuple[bytes, int]:
    """A CSV file written by ``csv.writer`` and its number of data records."""
    header = ["id", "text", *draw(st.lists(st.sampled_from(CSV_OPTIONAL), unique=True,
                                           max_size=4))]
    cell = st.one_of(control_text, st.sampled_from(["", "NaN", "nan", "[1,", '["a", 2]',
                                                    "a|b", "2023-05-01", "2023-05-01T10:00"]),
                     control_text.map(lambda s: s + "\udcff"))  # → invalid byte 0xff
    rows = draw(st.lists(st.lists(cell, min_size=len(header), max_size=len(header)),
                         max_size=8))
    end = draw(st.sampled_from(TERMINATORS))
    buf = io.StringIO()
    quoting = csv.QUOTE_MINIMAL if end == "\r\n" else csv.QUOTE_ALL  # QUOTE_MINIMAL only
    writer = csv.writer(buf, lineterminator=end, quoting=quoting)    # quotes \r\n's chars
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue().encode("utf-8", "surrogateescape"), len(rows)


# --------------------------------------------------------------------------- checks

@dataclass
class Outcome:
    """What one generated input did: ``crash`` (an exception's text) and counts."""

    crash: str | None = None
    records: int = 0
    accepted: int = 0
    rejected: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def silent_drops(self) -> int:
        return max(self.records - self.accepted - self.rejected, 0)


def check_loader(data: bytes, suffix: str, records: int) -> Outcome:
    """Write ``data`` to a ``.jsonl``/``.csv`` file, read it: one outcome per record?"""
    out = Outcome(records=records)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"corpus{suffix}"
        path.write_bytes(data)
        try:
            for item in iter_documents(path):
                if isinstance(item, Reject):
                    out.rejected += 1
                    if not item.message.startswith(f"{path}:"):
                        out.problems.append(f"reject without file:line: {item.message}")
                else:
                    out.accepted += 1
        except CorpusError as e:  # documented for file-level problems only
            out.problems.append(f"CorpusError on a generated file: {e}")
        except Exception as e:  # counting crashes is the point
            out.crash = f"{type(e).__name__}: {e}"
    if out.accepted + out.rejected != records:
        out.problems.append(f"{records} records, {out.accepted} accepted + "
                            f"{out.rejected} rejected")
    return out


def check_round_trip(docs_jsonl: bytes) -> Outcome:
    """Read, index into a fresh Edge store, close, reopen: every accepted document found?"""
    out = Outcome()
    emb = HashingEmbedder(64)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        corpus.write_bytes(docs_jsonl)
        where = Path(tmp) / "index"
        try:
            result = read_corpus(corpus)
            out.records, out.accepted = result.n_records, len(result.documents)
            out.rejected = len(result.rejects)
            store = open_store(where, "edge", embedder=emb.name, dim=emb.dim, create=True)
            try:
                report = index_documents(result.documents, store, emb, SourceTyper())
            finally:
                store.close()
            if report.indexed != len(result.documents):
                out.problems.append(f"indexed {report.indexed} of {len(result.documents)}")
            store = open_store(where)
            try:
                ids = [d.id for d in result.documents]
                found = store.existing_hashes(ids)
                missing = sorted(set(ids) - set(found))
                if missing or len(store) != len(ids):
                    out.problems.append(f"after reopening: {len(store)} points, missing "
                                        f"{missing[:5]}")
                if ids:
                    hits = store.search_dense("word", emb.embed(["word"])[0], len(ids))
                    if len(hits.doc_ids) != len(ids):
                        out.problems.append(f"search found {len(hits.doc_ids)} of {len(ids)}")
            finally:
                store.close()
        except Exception as e:  # counting crashes is the point
            out.crash = f"{type(e).__name__}: {e}"
    return out


@st.composite
def engine_corpora(draw: st.DrawFn) -> bytes:
    """JSONL of 1-6 documents with unique ids and random JSON extra fields."""
    n = draw(st.integers(1, 6))
    lines = []
    for i in range(n):
        rec: dict[str, Any] = {"id": f"d{i}", "text": draw(control_text) + " word"}
        if draw(st.booleans()):
            rec["url"] = draw(st.one_of(st.just("https://www.cdc.gov/flu"),
                                        st.just("ftp://example.org/x"), control_text))
        rec.update(draw(st.dictionaries(extra_keys, json_values, max_size=4)))
        lines.append(_json_line(rec, draw(st.booleans())))
    return b"\n".join(lines) + b"\n"


HTTP = ("http", "https")
SCHEMES = st.one_of(st.sampled_from(["http", "https", "HTTP", "hTTps", "ftp", "file", "mailto",
                                     "javascript", "data", "ws", "gopher", "git+ssh",
                                     "chrome-extension", "urn"]),
                    st.from_regex(r"[A-Za-z][A-Za-z0-9+.\-]{0,10}", fullmatch=True))
REST = st.one_of(st.sampled_from(["www.cdc.gov/flu", "who.int", "example.org:99999", "[::1]/x",
                                  "xn--n3h.com", "a..b", "%41.com", "cdc.gov@evil.com",
                                  "80/x", ""]),
                 control_text)


@st.composite
def urls(draw: st.DrawFn) -> tuple[str, str | None]:
    """A URL-ish string and, when it has one for sure, its scheme."""
    if draw(st.booleans()):
        return draw(st.one_of(st.text(max_size=60), control_text)), None
    scheme = draw(SCHEMES)
    sep = draw(st.sampled_from(["://", ":", ":/", ":///", "://user:pw@"]))
    rest = draw(REST)
    url = draw(st.sampled_from(["", " ", "\t"])) + scheme + sep + rest
    # 'host:8080' is a scheme-less host with a port, not a scheme
    known = None if sep == ":" and rest[:1].isdigit() else scheme
    return url, known


def check_url(url: str, scheme: str | None = None) -> Outcome:
    """Classify ``url``: no exception; when ``scheme`` is known and not http(s), the type
    must be ``unknown``."""
    out = Outcome()
    try:
        prov = SourceTyper().classify(url)
    except Exception as e:  # counting crashes is the point
        out.crash = f"{type(e).__name__}: {e}"
        return out
    if scheme is not None and scheme.lower() not in HTTP and prov.source_type != "unknown":
        out.problems.append(f"{url!r}: scheme {scheme!r} typed {prov.source_type}")
    return out


def _fails(out: Outcome) -> list[str]:
    return ([out.crash] if out.crash else []) + out.problems


# --------------------------------------------------------------------------- tests

@settings(derandomize=True, max_examples=60, deadline=None, database=None,
          suppress_health_check=HEALTH)
@given(jsonl_files())
def test_jsonl_every_record_is_a_document_or_a_reject(data: bytes) -> None:
    assert _fails(check_loader(data, ".jsonl", jsonl_records(data))) == []


@settings(derandomize=True, max_examples=40, deadline=None, database=None,
          suppress_health_check=HEALTH)
@given(csv_files())
def test_csv_every_record_is_a_document_or_a_reject(file: tuple[bytes, int]) -> None:
    data, records = file
    assert _fails(check_loader(data, ".csv", records)) == []


@settings(derandomize=True, max_examples=8, deadline=None, database=None,
          suppress_health_check=HEALTH)
@given(engine_corpora())
def test_accepted_documents_survive_indexing_and_reopening(data: bytes) -> None:
    assert _fails(check_round_trip(data)) == []


@settings(derandomize=True, max_examples=200, deadline=None, database=None,
          suppress_health_check=HEALTH)
@given(urls())
def test_url_typer_never_raises_and_types_other_schemes_unknown(
        url: tuple[str, str | None]) -> None:
    assert _fails(check_url(*url)) == []


def test_generators_reach_the_interesting_cases() -> None:
    """The deep, NaN and CR-only inputs above are really produced and really rejected."""
    deep: Any = "x"
    for _ in range(MAX_DEPTH):
        deep = [deep]
    lines = [json.dumps({"id": "a", "text": "t", "x_deep": deep}),
             json.dumps({"id": "b", "text": "t", "x_nan": float("nan")}),
             json.dumps({"id": "c", "text": "t"})]
    data = "\r".join(lines).encode()
    out = check_loader(data, ".jsonl", jsonl_records(data))
    assert _fails(out) == [] and (out.accepted, out.rejected) == (1, 2)
    assert check_url("ftp://www.cdc.gov/flu", "ftp").problems == []
    assert SourceTyper().classify("https://www.cdc.gov/flu").source_type != "unknown"
