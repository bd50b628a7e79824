"""What every evaluation-set reader shares: :class:`EvalSet`, errors, skip counting, date
parsing, answer matching and the pooled-set builder.

Every data file is read by one path, :func:`read_data_text` (the product's hardened
:func:`credrank.core.structured.read_bytes`, then :func:`decode_data`): a missing file, a
folder, or bytes that are not UTF-8 are a :class:`DatasetError` naming the file (and the line
and column of the first bad byte), whichever reader meets them.

The helpers below the "shared helpers" line (:class:`SkipCounter`, :class:`PoolBuilder`,
:func:`check_consistency`, :func:`existing_path`, :func:`read_data_text`, :func:`iter_jsonl`,
...) are the readers' common toolkit: public within the package, used by every reader
module, but not re-exported from :mod:`credrank_bench.datasets` (the package's API is the
readers, :class:`EvalSet` and the answer/date utilities). Helpers only this module uses keep
a leading underscore."""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from credrank.core.structured import csv_records, decode_utf8, read_bytes
from credrank.documents.schema import Document
from credrank.evaluate.answers import squad_normalize

Qrels = dict[str, dict[str, int]]

#: path of each set's default file or folder, relative to the shared data root
DEFAULT_PATHS: dict[str, str] = {
    "trec2019-hm": "trec2019_hm/trec2019_hm_dev.csv",
    "newspolluted": "cag/NewsPolluted.json",
    "cram-nq": "cram/cram_nq_1000_reconstructed.jsonl",
    "evotemp": "cag/EvoTemp.json",
    "ramdocs": "ramdocs/RAMDocs_test.jsonl",
    "coaid": "coaid",
    "realtimeqa": "realtimeqa",
}

#: the credibility label CAG leaked into NewsPolluted texts (SOURCES.md)
LEAKED_LABEL = re.compile(r"(High|Middle|Medium|Low) credibility of text: ?", re.IGNORECASE)

#: the largest data file a reader takes (bytes, after decompression): every file is read whole
#: by :func:`read_data_text` (the shared sets are 0.1–18 MB)
MAX_DATA_BYTES = 2**31 - 1


class DatasetError(ValueError):
    """A data file is missing, unreadable or not in the expected format."""


@dataclass(frozen=True)
class EvalSet:
    """One evaluation set in a common shape.

    Attributes:
        name: registry name of the reader.
        documents: one corpus (``pools is None``) or the union of per-question pools.
        queries: ``(qid, text)`` in file order.
        qrels: ``{qid: {docid: gain}}``; every query has an entry (possibly with no
            relevant document); documents judged non-relevant carry gain 0.
        bad: ``{qid: {docid}}`` labelled harmful / misinformation documents (harmful@k).
        pools: ``{qid: [docid]}`` candidate pool per question, or ``None`` for one corpus.
        doc_labels: ``{docid: {label: value}}`` labels for experiments (never evidence).
        notes: limits, provenance caveats, skip counts and the rules used.
        query_labels: ``{qid: {label: value}}`` per-question facts (answers, dates).
    """

    name: str
    documents: list[Document]
    queries: list[tuple[str, str]]
    qrels: Qrels
    bad: dict[str, set[str]]
    pools: dict[str, list[str]] | None
    doc_labels: dict[str, dict[str, Any]]
    notes: list[str]
    query_labels: dict[str, dict[str, Any]] = field(default_factory=dict)

    def summary(self) -> dict[str, int]:
        """Counts for reports: documents, queries, relevant and bad judgements."""
        return {
            "documents": len(self.documents),
            "queries": len(self.queries),
            "relevant": sum(1 for j in self.qrels.values() for g in j.values() if g > 0),
            "queries_with_relevant": sum(1 for j in self.qrels.values()
                                         if any(g > 0 for g in j.values())),
            "bad": sum(len(b) for b in self.bad.values()),
        }

    def document_map(self) -> dict[str, Document]:
        """``{doc.id: doc}``."""
        return {d.id: d for d in self.documents}


# ------------------------------------------------------- shared helpers (the readers' toolkit)


class SkipCounter:
    """Counts skipped records (and kept-but-repaired ones) by reason, rendered into notes."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.fixes: Counter[str] = Counter()

    def add(self, reason: str, n: int = 1) -> None:
        self.counts[reason] += n

    def fix(self, reason: str, n: int = 1) -> None:
        self.fixes[reason] += n

    def notes(self) -> list[str]:
        out = [f"skipped {n}: {reason}" for reason, n in sorted(self.counts.items())]
        out += [f"kept but changed {n}: {reason}" for reason, n in sorted(self.fixes.items())]
        return out or ["skipped: none"]


def existing_path(path: str | Path, what: str) -> Path:
    """``path`` as a :class:`Path`; :class:`DatasetError` naming ``what`` when it is absent."""
    p = Path(path)
    if not p.exists():
        raise DatasetError(f"path: {what} not found at {p}")
    return p


def _a(what: str) -> str:
    return f"{'an' if what[:1].lower() in 'aeiou' else 'a'} {what}"


def data_file(path: str | Path, what: str) -> Path:
    """``path`` as a :class:`Path` when it is a file; :class:`DatasetError` naming ``what``
    when it is absent or a folder."""
    p = existing_path(path, what)
    if p.is_dir():
        raise DatasetError(f"{p}: expected {_a(what)}, got a folder")
    return p


def decode_data(data: bytes, where: str) -> str:
    """The one decoding rule of every data reader, the product's
    (:func:`credrank.core.structured.decode_utf8`): ``data`` as UTF-8 text, a UTF-8
    byte-order mark dropped. A UTF-16/UTF-32 byte-order mark, a byte that is not UTF-8 or a NUL
    byte is a :class:`DatasetError` naming ``where`` (the file) with the line and column of the
    first offending byte, what was expected and what came."""
    return decode_utf8(data, where, error=DatasetError)


def read_data_text(path: str | Path, what: str) -> str:
    """The text of the data file ``path`` (``what`` it should be, for messages): the one read
    path of every reader — :func:`data_file` (absent or a folder: an error naming ``what``),
    the product's hardened :func:`credrank.core.structured.read_bytes` (unreadable or larger
    than :data:`MAX_DATA_BYTES`: an error naming the file), then :func:`decode_data`. Every
    error is a :class:`DatasetError` naming the file."""
    p = data_file(path, what)
    return decode_data(read_bytes(p, what=what, max_bytes=MAX_DATA_BYTES, error=DatasetError),
                       str(p))


def load_json_list(path: str | Path) -> list[Any]:
    """The JSON list in ``path`` (a file of question records); :class:`DatasetError` when the
    file is missing, a folder, not UTF-8, not JSON or not a list."""
    p = Path(path)
    try:
        data = json.loads(read_data_text(p, "JSON file"))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{p}: not valid JSON ({exc})") from None
    if not isinstance(data, list):
        raise DatasetError(f"{p}: expected a JSON list of question records; got "
                           f"{type(data).__name__}")
    return data


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """``(line number, parsed value)`` per non-blank line (lines end at ``\\n`` only);
    :class:`DatasetError` naming the file (:func:`read_data_text`) and, for invalid JSON, the
    line."""
    p = Path(path)
    text = read_data_text(p, "JSONL file")
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{p}:{lineno}: not valid JSON ({exc})") from None
        yield lineno, value


def read_csv_rows(path: Path, required: tuple[str, ...], what: str = "CSV file"
                  ) -> list[dict[str, str]]:
    """Rows of a CSV file with a header holding every ``required`` column: the text read by
    :func:`read_data_text` (a UTF-8 byte-order mark dropped), then :func:`csv_dict_rows`."""
    return [row for _, row in csv_dict_rows(read_data_text(path, what), str(path), required,
                                            what)]


def csv_dict_rows(text: str, where: str, required: tuple[str, ...], what: str = "CSV file"
                  ) -> Iterator[tuple[int, dict[str, str]]]:
    """``(line, {column: value})`` per data row of the CSV ``text`` of file ``where``, read
    strictly by the product's CSV parser (:func:`credrank.core.structured.csv_records`: a
    quoted field never closed, a file cut inside one included, is an error naming the line
    where it began); page text may span lines and be long (up to :data:`MAX_DATA_BYTES`).
    The header must name every ``required`` column, each column once. A row whose number of
    cells differs from the header's is an error naming ``file:line`` (never padded or cut);
    blank lines are skipped; empty cells are ``""``. Every error is a
    :class:`DatasetError`."""
    records = csv_records(io.StringIO(text, newline=""), where, error=DatasetError,
                          may_span=lambda _: True, max_chars=MAX_DATA_BYTES)
    header: list[str] | None = None
    old_limit = csv.field_size_limit(MAX_DATA_BYTES)  # for this read only, then restored
    try:
        for line, cells in records:
            if not cells:
                continue
            if header is None:
                header = _csv_header(where, line, cells, required)
                continue
            if len(cells) != len(header):
                raise DatasetError(f"{where}:{line}: expected {len(header)} columns, got "
                                   f"{len(cells)}")
            yield line, dict(zip(header, cells, strict=True))
    finally:
        csv.field_size_limit(old_limit)
    if header is None:
        raise DatasetError(f"{where}: missing column(s) {list(required)}; expected "
                           f"{list(required)}; found an empty {what}")


def _csv_header(path: str, line: int, cells: list[str], required: tuple[str, ...]
                ) -> list[str]:
    """The column names of a CSV header row (stripped, a byte-order mark dropped): each named
    once, every ``required`` one there; :class:`DatasetError` naming the file otherwise."""
    header = [c.lstrip("\ufeff").strip() if i == 0 else c.strip() for i, c in enumerate(cells)]
    missing = [c for c in required if c not in header]
    if missing:
        raise DatasetError(f"{path}: missing column(s) {missing}; expected {list(required)}; "
                           f"found {header}")
    twice = sorted({c for c in header if header.count(c) > 1})
    if twice:
        raise DatasetError(f"{path}:{line}: header: expected each column named once, got "
                           f"{twice} more than once")
    return header


def nonempty_text(value: Any) -> str | None:
    """A non-empty stripped string, else ``None``."""
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _unique_qid(qid: str, record: Any, seen: dict[str, Any], skips: SkipCounter
                ) -> str | None:
    """``None`` for an exact duplicate record; a suffixed qid for a conflicting one."""
    if qid not in seen:
        seen[qid] = record
        return qid
    if seen[qid] == record:
        skips.add("exact duplicate question record (same id, same content)")
        return None
    k = 2
    while f"{qid}~{k}" in seen:
        k += 1
    new = f"{qid}~{k}"
    seen[new] = record
    skips.fix("question id reused with different content, renamed '<id>~<k>'")
    return new


def question_qid(rec: Any, seen: dict[str, Any], skips: SkipCounter, *,
                 need_answers: bool = False) -> str | None:
    """The (unique) qid of a pooled-set question record, or ``None`` (counted in ``skips``)
    when it lacks an id, a question, a docs list (or, with ``need_answers``, an answers list)
    or exactly repeats an earlier record."""
    ok = (isinstance(rec, dict) and isinstance(rec.get("docs"), list)
          and nonempty_text(rec.get("question")) is not None and rec.get("id") is not None
          and (not need_answers or isinstance(rec.get("answers"), list)))
    if not ok:
        skips.add("question record without id, question, answers or docs list" if need_answers
                  else "question record without id, question or docs list")
        return None
    return _unique_qid(str(rec["id"]), rec, seen, skips)


@dataclass(frozen=True)
class SetShape:
    """The fields that identify one pooled set's question records among its neighbours' (the
    CAG sets share a schema, so a file of one reads as the other without this): a record of
    the set has every ``record_keys`` field and its documents (the list under ``docs_key``)
    include one with every ``doc_keys`` field."""

    title: str
    docs_key: str
    record_keys: tuple[str, ...] = ()
    doc_keys: tuple[str, ...] = ()

    def matches(self, rec: Any) -> bool:
        docs = rec.get(self.docs_key) if isinstance(rec, dict) else None
        return (isinstance(docs, list) and all(k in rec for k in self.record_keys)
                and (not self.doc_keys or any(isinstance(d, dict) and all(k in d for k in
                                                                        self.doc_keys)
                                              for d in docs)))

    def describe(self) -> str:
        parts = [f"field {k!r}" for k in self.record_keys]
        parts += [f"documents under {self.docs_key!r}"
                  + (f" with {', '.join(repr(k) for k in self.doc_keys)}" if self.doc_keys
                     else "")]
        return f"{self.title} question records ({'; '.join(parts)})"


#: the identifying shape of each pooled set read from question records (the other sets are
#: CSV files, a folder or a JSON object, refused by their own columns and types)
SHAPES: dict[str, SetShape] = {
    "newspolluted": SetShape("CAG NewsPolluted", "docs", record_keys=("choices",)),
    "evotemp": SetShape("CAG EvoTemp", "docs", record_keys=("q_date",), doc_keys=("date",)),
    "cram-nq": SetShape("CrAM NQ", "docs", doc_keys=("is_misinformation",)),
    "ramdocs": SetShape("RAMDocs", "documents", doc_keys=("type",)),
}


def check_shape(name: str, path: str | Path, records: list[Any]) -> None:
    """:class:`DatasetError` naming ``path`` when ``records`` hold question records (a
    question and a list of documents) and none has the shape of set ``name``
    (:data:`SHAPES`): saying what was expected, what came, and which set the records fit.

    Records that are no question records at all are left to the reader (counted as skipped;
    a file without any is refused as empty by the bench)."""
    shape = SHAPES[name]
    questions = [r for r in records if isinstance(r, dict) and r.get("question") is not None
                 and any(isinstance(r.get(k), list) for k in ("docs", "documents"))]
    if not questions or any(shape.matches(r) for r in questions):
        return
    keys = sorted({k for r in questions for k in r})
    doc_keys = sorted({k for r in questions for list_key in ("docs", "documents")
                       if isinstance(r.get(list_key), list) for d in r[list_key]
                       if isinstance(d, dict) for k in d})
    fits = [other for other, s in SHAPES.items()
            if other != name and sum(s.matches(r) for r in questions) * 2 > len(questions)]
    guess = (f": is this {SHAPES[fits[0]].title}, the data of bench {fits[0]}?" if fits
             else "")
    raise DatasetError(f"{path}: expected {shape.describe()}; got {len(questions)} question "
                       f"records without them (record fields {keys[:12]}, document fields "
                       f"{doc_keys[:12]}){guess}")


def contains_answer(text: str, answers: list[str]) -> bool:
    """True when a normalised answer occurs in the normalised text as whole tokens
    (:func:`credrank.evaluate.answers.squad_normalize`)."""
    padded = f" {squad_normalize(text)} "
    for answer in answers:
        norm = squad_normalize(answer)
        if norm and f" {norm} " in padded:
            return True
    return False


def strip_leaked_label(text: str) -> tuple[str, int]:
    """Remove every ``(High|Middle|Medium|Low) credibility of text: `` (case-insensitive),
    repeating until none is left (a removal cannot splice a new one together). Returns the
    text and the number of removals."""
    removed = 0
    while True:
        text, n = LEAKED_LABEL.subn("", text)
        if n == 0:
            return text, removed
        removed += n


def check_consistency(es: EvalSet) -> EvalSet:
    """``es`` unchanged if its ids are unique and every qrels/bad/pools entry names a known
    query and document; :class:`DatasetError` (a reader bug) otherwise."""
    ids = [d.id for d in es.documents]
    dup = [i for i, n in Counter(ids).items() if n > 1]
    if dup:
        raise DatasetError(f"{es.name}: duplicate document ids {dup[:5]} (reader bug)")
    known = set(ids)
    qids = [q for q, _ in es.queries]
    if len(set(qids)) != len(qids):
        raise DatasetError(f"{es.name}: duplicate qids (reader bug)")
    for q in qids:
        if q not in es.qrels:
            raise DatasetError(f"{es.name}: query {q!r} has no qrels entry (reader bug)")
    groups: list[tuple[str, dict[str, Any]]] = [("qrels", es.qrels), ("bad", es.bad)]
    if es.pools is not None:
        groups.append(("pools", es.pools))
    for label, group in groups:
        for q, docs in group.items():
            stray = [d for d in docs if d not in known]
            if stray:
                raise DatasetError(f"{es.name}: {label}[{q!r}] names unknown docs {stray[:3]}")
    return es


# ---------------------------------------------------------------- date parsing

_MONTHS = {m: i for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)}


def _date(y: int, m: int, d: int) -> datetime | None:
    try:
        return datetime(y, m, d, tzinfo=UTC)
    except ValueError:
        return None


def parse_day(value: Any) -> tuple[datetime | None, str]:
    """Parse a calendar day as midnight UTC. Returns ``(date or None, kind)``.

    Accepted (unambiguous) forms: ``YYYY/MM/DD``, ``YYYY-MM-DD``, ``D Mon YYYY`` (``Sept``
    too), ``DD.MM.YYYY``. Everything else gives ``None`` with a kind: ``missing``,
    ``relative`` ("5 days ago": relative to an unknown crawl time), ``year-only``,
    ``ambiguous`` (``NN/NN/YYYY``: day-month order unknown), ``invalid`` or ``other``.
    """
    if value is None or (isinstance(value, float) and value != value):  # NaN
        return None, "missing"
    if not isinstance(value, str) or not value.strip():
        return None, "missing"
    s = value.strip()
    if m := re.fullmatch(r"(\d{4})[/-](\d{1,2})[/-](\d{1,2})", s):
        d = _date(int(m[1]), int(m[2]), int(m[3]))
        return d, "ymd" if d else "invalid"
    if m := re.fullmatch(r"(\d{1,2}) ([A-Za-z]{3,9})\.? (\d{4})", s):
        month = _MONTHS.get(m[2][:3].lower())
        d = _date(int(m[3]), month, int(m[1])) if month else None
        return d, "d-mon-y" if d else "invalid"
    if m := re.fullmatch(r"(\d{1,2})\.(\d{1,2})\.(\d{4})", s):
        d = _date(int(m[3]), int(m[2]), int(m[1]))
        return d, "d.m.y" if d else "invalid"
    if re.search(r"\bago\b|^há\b", s, re.IGNORECASE):
        return None, "relative"
    if re.fullmatch(r"\d{4}", s):
        return None, "year-only"
    if re.fullmatch(r"\d{1,2}/\d{1,2}/\d{2,4}", s):
        return None, "ambiguous"
    return None, "other"


def iso_timestamp(value: str) -> datetime | None:
    """An ISO 8601 timestamp (UTC when it has no zone), or ``None`` when it does not parse."""
    try:
        ts = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)




# ---------------------------------------------------------------- pooled-set builder


class PoolBuilder:
    """Accumulates a per-question pooled set with ``"<qid>/d<position>"`` document ids."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.documents: list[Document] = []
        self.queries: list[tuple[str, str]] = []
        self.qrels: Qrels = {}
        self.bad: dict[str, set[str]] = {}
        self.pools: dict[str, list[str]] = {}
        self.doc_labels: dict[str, dict[str, Any]] = {}
        self.query_labels: dict[str, dict[str, Any]] = {}

    @staticmethod
    def doc_id(qid: str, pos: int) -> str:
        return f"{qid}/d{pos}"

    def add_query(self, qid: str, text: str, labels: dict[str, Any]) -> None:
        self.queries.append((qid, text))
        self.qrels[qid], self.bad[qid], self.pools[qid] = {}, set(), []
        self.query_labels[qid] = labels

    def add_doc(self, qid: str, pos: int, doc: Document, *, gain: int, bad: bool,
                labels: dict[str, Any]) -> None:
        self.documents.append(doc)
        self.pools[qid].append(doc.id)
        self.qrels[qid][doc.id] = gain
        if bad:
            self.bad[qid].add(doc.id)
        self.doc_labels[doc.id] = {"qid": qid, "position": pos, **labels}

    def build(self, notes: list[str]) -> EvalSet:
        no_rel = sum(1 for j in self.qrels.values() if not any(g > 0 for g in j.values()))
        notes = [*notes, f"{no_rel} of {len(self.queries)} questions have no relevant document"]
        return check_consistency(EvalSet(
            name=self.name, documents=self.documents, queries=self.queries, qrels=self.qrels,
            bad=self.bad, pools=self.pools, doc_labels=self.doc_labels, notes=notes,
            query_labels=self.query_labels))


