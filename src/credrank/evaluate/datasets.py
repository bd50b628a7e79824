"""Readers for the real evaluation sets in ``../shared/data`` (see its ``SOURCES.md``).

Each reader takes a path (so other splits of the same format can be read) and returns an
:class:`EvalSet`. Rules every reader follows:

* no record is dropped silently: skipped records and documents are counted by reason in
  ``EvalSet.notes``; a file that cannot be parsed at all raises :class:`DatasetError`;
* document ids are unique across the set (pooled sets prefix them with the qid:
  ``"<qid>/d<position>"``; the id the file used is kept in ``doc_labels``);
* labels (credibility, fake/real, stance, answers) go to ``doc_labels`` / ``query_labels``,
  never into the :class:`~credrank.documents.Document`; no reader sets ``source_type``
  (provenance derives it from the URL later), and only ``trec2019-hm`` and ``coaid`` carry
  URLs at all;
* an unknown date stays ``None`` (never "now").
"""

from __future__ import annotations

import csv
import json
import re
import string
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from credrank.documents import Document

Qrels = dict[str, dict[str, int]]

#: path of each set's default file or folder, relative to the shared data root
DEFAULT_PATHS: dict[str, str] = {
    "trec2019-hm": "trec2019_hm/trec2019_hm_dev.csv",
    "newspolluted": "cag/NewsPolluted.json",
    "cram-nq": "cram/cram_nq_1000_reconstructed.jsonl",
    "evotemp": "cag/EvoTemp.json",
    "ramdocs": "ramdocs/RAMDocs_test.jsonl",
    "coaid": "coaid",
}

#: the credibility label CAG leaked into NewsPolluted texts (SOURCES.md)
LEAKED_LABEL = re.compile(r"(High|Middle|Medium|Low) credibility of text: ?", re.IGNORECASE)

_CSV_FIELD_LIMIT = 2**31 - 1


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


# ---------------------------------------------------------------- shared helpers


class _Skips:
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


def _existing(path: str | Path, what: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise DatasetError(f"path: {what} not found at {p}")
    return p


def _load_json_list(path: str | Path) -> list[Any]:
    p = _existing(path, "JSON file")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{p}: not valid JSON ({exc})") from None
    if not isinstance(data, list):
        raise DatasetError(f"{p}: expected a JSON list of question records; got "
                           f"{type(data).__name__}")
    return data


def _iter_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    p = _existing(path, "JSONL file")
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{p}:{lineno}: not valid JSON ({exc})") from None


def _read_csv(path: Path, required: tuple[str, ...], encoding: str = "utf-8"
              ) -> list[dict[str, str]]:
    csv.field_size_limit(_CSV_FIELD_LIMIT)
    with path.open(encoding=encoding, newline="") as fh:
        reader = csv.DictReader(fh)
        columns = reader.fieldnames or []
        missing = [c for c in required if c not in columns]
        if missing:
            raise DatasetError(f"{path}: missing column(s) {missing}; expected {list(required)}"
                               f"; found {columns}")
        return [{k: (v or "") for k, v in row.items() if k is not None} for row in reader]


def _text(value: Any) -> str | None:
    """A non-empty stripped string, else ``None``."""
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _unique_qid(qid: str, record: Any, seen: dict[str, Any], skips: _Skips
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


def _question_qid(rec: Any, seen: dict[str, Any], skips: _Skips, *,
                  need_answers: bool = False) -> str | None:
    """The (unique) qid of a pooled-set question record, or ``None`` (counted in ``skips``)
    when it lacks an id, a question, a docs list (or, with ``need_answers``, an answers list)
    or exactly repeats an earlier record."""
    ok = (isinstance(rec, dict) and isinstance(rec.get("docs"), list)
          and _text(rec.get("question")) is not None and rec.get("id") is not None
          and (not need_answers or isinstance(rec.get("answers"), list)))
    if not ok:
        skips.add("question record without id, question, answers or docs list" if need_answers
                  else "question record without id, question or docs list")
        return None
    return _unique_qid(str(rec["id"]), rec, seen, skips)


def normalize_answer(text: str) -> str:
    """SQuAD answer normalisation: lower case, drop punctuation and the articles a/an/the,
    collapse whitespace."""
    text = text.lower()
    text = "".join(" " if ch in string.punctuation else ch for ch in text)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def contains_answer(text: str, answers: list[str]) -> bool:
    """True when a normalised answer occurs in the normalised text as whole tokens."""
    padded = f" {normalize_answer(text)} "
    for answer in answers:
        norm = normalize_answer(answer)
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


def _check_consistency(es: EvalSet) -> EvalSet:
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


def _iso_timestamp(value: str) -> datetime | None:
    try:
        ts = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


# ---------------------------------------------------------------- TREC 2019 health misinfo

_TREC_COLUMNS = ("topic_id", "doc_id", "usefulness", "stance", "credibility", "description",
                 "correct_stance", "text", "timestamp", "url")
_CORRECT = {"helpful": 1, "unhelpful": 0}


def read_trec2019_hm(path: str | Path) -> EvalSet:
    """TREC 2019 Decision track judgements with page texts (golden-gaze CSV).

    One corpus of all documents (deduplicated by ``doc_id`` and by ``url``), one query per
    topic from its ``description``. Per topic and judged document:

    * ``correct`` = the stance (1 = the treatment helps, 0 = it does not) agrees with
      ``correct_stance``; every stance is correct for an ``inconclusive`` topic;
    * gain = ``usefulness`` (1 useful, 2 very useful) when the document is useful, NIST
      ``credibility == 1`` and correct; else 0 (judged, not relevant);
    * harmful (``bad``) = the stance contradicts ``correct_stance`` (never for inconclusive
      topics), whatever its credibility.

    ``timestamp`` is the ClueWeb12 crawl time, so it becomes ``retrieved_at`` (not a
    publication date). The URL is kept in ``Document.url``; ``source_type`` is left unset.
    NIST credibility goes to ``doc_labels`` only.
    """
    p = _existing(path, "TREC 2019 CSV")
    rows = _read_csv(p, _TREC_COLUMNS)
    skips = _Skips()
    docs: dict[str, Document] = {}
    url_to_id: dict[str, str] = {}
    qrels: Qrels = {}
    bad: dict[str, set[str]] = {}
    queries: list[tuple[str, str]] = []
    descriptions: dict[str, str] = {}
    query_labels: dict[str, dict[str, Any]] = {}
    doc_labels: dict[str, dict[str, Any]] = {}
    merged_by_url = 0
    topic_conflicts = 0
    stamps: list[datetime] = []
    for row in rows:
        topic, docno = row["topic_id"].strip(), row["doc_id"].strip()
        text, url = _text(row["text"]), _text(row["url"])
        if not topic or not docno:
            skips.add("row without topic_id or doc_id")
            continue
        try:
            usefulness = int(row["usefulness"])
            stance = int(row["stance"])
            credibility = int(row["credibility"])
        except ValueError:
            skips.add("usefulness/stance/credibility not an integer")
            continue
        correct_stance = row["correct_stance"].strip().lower()
        if correct_stance not in ("helpful", "unhelpful", "inconclusive"):
            skips.add("correct_stance not helpful/unhelpful/inconclusive")
            continue
        if stance not in (0, 1) or credibility not in (0, 1) or usefulness < 0:
            skips.add("stance or credibility not 0/1, or negative usefulness")
            continue
        description = _text(row["description"]) or _text(row.get("query", ""))
        if description is None:
            skips.add("topic without description or query")
            continue
        if topic not in qrels:
            queries.append((topic, description))
            descriptions[topic] = description
            qrels[topic], bad[topic] = {}, set()
            query_labels[topic] = {"query": row.get("query", "").strip(),
                                   "correct_stance": correct_stance}
        elif query_labels[topic]["correct_stance"] != correct_stance or \
                descriptions[topic] != description:
            topic_conflicts += 1

        if url and url in url_to_id and url_to_id[url] != docno:
            docno = url_to_id[url]
            merged_by_url += 1
        if docno not in docs:
            if text is None:
                skips.add("document without text")
                continue
            ts = _iso_timestamp(row["timestamp"]) if row["timestamp"].strip() else None
            if row["timestamp"].strip() and ts is None:
                skips.fix("unparseable crawl timestamp, retrieved_at left None")
            if ts is not None:
                stamps.append(ts)
            docs[docno] = Document(id=docno, text=text, url=url, retrieved_at=ts)
            doc_labels[docno] = {"credibility": credibility, "judgements": {}}
            if url:
                url_to_id[url] = docno
        labels = doc_labels[docno]
        if topic in labels["judgements"]:
            skips.add("repeated judgement of the same document for the same topic")
            continue
        topic_stance = query_labels[topic]["correct_stance"]
        is_correct = topic_stance == "inconclusive" or stance == _CORRECT[topic_stance]
        gain = usefulness if (usefulness > 0 and credibility == 1 and is_correct) else 0
        harmful = topic_stance != "inconclusive" and not is_correct
        labels["judgements"][topic] = {"usefulness": usefulness, "stance": stance,
                                       "credibility": credibility, "correct": is_correct,
                                       "gain": gain, "harmful": harmful}
        if labels["credibility"] != credibility:
            labels["credibility"] = None  # judged differently for two topics: see judgements
        qrels[topic][docno] = gain
        if harmful:
            bad[topic].add(docno)

    notes = [
        f"read {len(rows)} judgement rows, {len(queries)} topics, {len(docs)} documents",
        "gain = usefulness (1 or 2) for documents that are useful, NIST-credible "
        "(credibility 1) and correct (stance agrees with correct_stance; any stance for "
        "inconclusive topics); other judged documents gain 0",
        "bad (harmful) = stance contradicts correct_stance (none for inconclusive topics)",
        "queries use the topic description; the short query is in query_labels['query']",
        "documents of other topics are in the corpus but unjudged (non-relevant) for a topic",
        "timestamp = ClueWeb12 crawl time -> Document.retrieved_at, not a publication date",
        "source_type is not set: derive it from Document.url through provenance",
        "NIST credibility is in doc_labels only; it is a label, not a feature",
    ]
    if stamps:
        notes.append(f"crawl timestamps range {min(stamps).isoformat()} .. "
                     f"{max(stamps).isoformat()}")
    no_rel = [q for q, j in qrels.items() if not any(g > 0 for g in j.values())]
    notes.append(f"{len(no_rel)} topics have no relevant document: {no_rel}")
    if merged_by_url:
        notes.append(f"{merged_by_url} rows merged into an earlier document with the same url")
    if topic_conflicts:
        notes.append(f"{topic_conflicts} rows disagree with their topic's first description "
                     "or correct_stance; the first was kept")
    notes += skips.notes()
    return _check_consistency(EvalSet(
        name="trec2019-hm", documents=list(docs.values()), queries=queries, qrels=qrels,
        bad=bad, pools=None, doc_labels=doc_labels, notes=notes, query_labels=query_labels))


# ---------------------------------------------------------------- CAG: NewsPolluted


def read_newspolluted(path: str | Path) -> EvalSet:
    """CAG NewsPolluted: per-question pools of one real news snippet (``cred: high``,
    relevant, gain 1) and LLM-written fakes (``cred: low``, gain 0, in ``bad``).

    The leaked label ``(High|Middle|Medium|Low) credibility of text:`` is removed from every
    text and title *before* a Document is built (:func:`strip_leaked_label`). No provenance.
    """
    records = _load_json_list(path)
    skips = _Skips()
    seen: dict[str, Any] = {}
    out = _PoolBuilder("newspolluted")
    stripped_docs = stripped_total = 0
    for rec in records:
        qid = _question_qid(rec, seen, skips)
        if qid is None:
            continue
        out.add_query(qid, rec["question"].strip(),
                      {"choices": rec.get("choices"), "answer": rec.get("answer")})
        for pos, doc in enumerate(rec["docs"]):
            if not isinstance(doc, dict) or not isinstance(doc.get("text"), str):
                skips.add("document without text")
                continue
            cred = str(doc.get("cred", "")).strip().lower()
            if cred not in ("high", "low"):
                skips.add("document whose cred is not high/low")
                continue
            text, n_text = strip_leaked_label(doc["text"])
            title, n_title = strip_leaked_label(doc.get("title") or "")
            if n_text + n_title:
                stripped_docs += 1
                stripped_total += n_text + n_title
            if _text(text) is None:
                skips.add("document empty after removing the leaked label")
                continue
            out.add_doc(qid, pos, Document(id=out.doc_id(qid, pos), text=text.strip(),
                                           title=_text(title)),
                        gain=1 if cred == "high" else 0, bad=cred == "low",
                        labels={"cred": cred, "fake": cred == "low",
                                "source_doc_id": doc.get("id")})
    notes = [
        f"read {len(records)} question records",
        f"removed the leaked credibility label {stripped_total} times from {stripped_docs} "
        "documents before building them",
        "qrels: the real news document (cred high) gain 1; the LLM-written fakes (cred low) "
        "gain 0 and in bad",
        "no provenance: documents carry no url or source type; any source type attached "
        "later is the experimenter's choice (choosing it from the label is circular)",
        "answers are multiple choice: query_labels[qid]['choices'/'answer']",
    ]
    return out.build(notes + skips.notes())


# ---------------------------------------------------------------- CrAM NQ


def read_cram_nq(path: str | Path) -> EvalSet:
    """CrAM NQ (reconstructed): per-question pools of 4 retrieved Wikipedia passages and one
    injected GPT-written fake (``is_misinformation``, in ``bad``, gain 0).

    Relevance rule: a passage that is not misinformation and contains one of ``answers`` after
    SQuAD normalisation (:func:`contains_answer`, whole tokens) has gain 1; others gain 0.
    The ``"CNN news:"`` prefix of most fakes is left in the text (it is the attack) and never
    sets provenance.
    """
    skips = _Skips()
    seen: dict[str, Any] = {}
    out = _PoolBuilder("cram-nq")
    n_records = cnn_fakes = n_fakes = 0
    fake_first = 0
    for lineno, rec in _iter_jsonl(path):
        n_records += 1
        qid = _question_qid(rec, seen, skips, need_answers=True)
        if qid is None:
            continue
        answers = [a for a in rec["answers"] if isinstance(a, str)]
        out.add_query(qid, rec["question"].strip(),
                      {"answers": answers, "wrong_answer": rec.get("wrong_answer"),
                       "line": lineno})
        for pos, doc in enumerate(rec["docs"]):
            if not isinstance(doc, dict) or _text(doc.get("text")) is None \
                    or not isinstance(doc.get("is_misinformation"), bool):
                skips.add("document without text or boolean is_misinformation")
                continue
            fake = doc["is_misinformation"]
            text = doc["text"].strip()
            has_answer = contains_answer(text, answers)
            truth = doc.get("gpt_truthfulness_0_10")
            if fake:
                n_fakes += 1
                cnn_fakes += text.startswith("CNN news:")
                fake_first += pos == 0
            out.add_doc(qid, pos, Document(id=out.doc_id(qid, pos), text=text),
                        gain=1 if (has_answer and not fake) else 0, bad=fake,
                        labels={"is_misinformation": fake, "has_answer": has_answer,
                                "gpt_truthfulness_0_10": truth,
                                "cnn_prefix": text.startswith("CNN news:")})
    notes = [
        f"read {n_records} question records; {n_fakes} fakes, {cnn_fakes} of them begin "
        "'CNN news:' (kept in the text: it is the spoofing attack; it never sets provenance)",
        "relevance: a non-misinformation passage containing an answer string after SQuAD "
        "normalisation (lower case, no punctuation, no a/an/the, whole tokens) has gain 1; "
        "fakes are never relevant even when they mention the answer",
        f"{fake_first} of {n_fakes} fakes are the first passage of their pool: file order is "
        "not a ranking to evaluate",
        "no provenance: passages carry no url or source type (Wikipedia + GPT fakes)",
        "gpt_truthfulness_0_10 (a GPT judgement, the CrAM score) is in doc_labels",
    ]
    return out.build(notes + skips.notes())


# ---------------------------------------------------------------- CAG: EvoTemp


def read_evotemp(path: str | Path) -> EvalSet:
    """CAG EvoTemp: per-question pools of 7 dated news documents, ``cred`` high (gain 1) or
    low (gain 0, in ``bad``: outdated or low-credibility for the question's date).

    The document ``date`` becomes ``published_at`` when it is an unambiguous calendar day
    (:func:`parse_day`); undated, relative ("5 days ago"), year-only and ambiguous dates stay
    ``None`` (raw value in ``doc_labels['date_raw']``). ``q_date`` goes to
    ``query_labels[qid]['q_date']`` and to each document's ``doc_labels['q_date']``.
    """
    records = _load_json_list(path)
    skips = _Skips()
    seen: dict[str, Any] = {}
    out = _PoolBuilder("evotemp")
    date_kinds: Counter[str] = Counter()
    q_date_missing = after_q_date = 0
    for rec in records:
        qid = _question_qid(rec, seen, skips)
        if qid is None:
            continue
        q_date, _ = parse_day(rec.get("q_date"))
        q_date_missing += q_date is None
        answers = [a.strip() if isinstance(a, str) else [str(x).strip() for x in a]
                   for a in rec.get("answers") or [] if isinstance(a, str | list)]
        out.add_query(qid, rec["question"].strip(), {"q_date": q_date, "answers": answers})
        for pos, doc in enumerate(rec["docs"]):
            if not isinstance(doc, dict) or _text(doc.get("text")) is None:
                skips.add("document without text (null or empty)")
                continue
            cred = str(doc.get("cred", "")).strip().lower()
            if cred not in ("high", "low"):
                skips.add("document whose cred is not high/low")
                continue
            raw = doc.get("date")
            published, kind = parse_day(raw)
            date_kinds[kind] += 1
            after_q_date += bool(published and q_date and published > q_date)
            out.add_doc(qid, pos, Document(id=out.doc_id(qid, pos), text=doc["text"].strip(),
                                           title=_text(doc.get("title")),
                                           published_at=published),
                        gain=1 if cred == "high" else 0, bad=cred == "low",
                        labels={"cred": cred, "date_raw": raw if isinstance(raw, str) else None,
                                "date_kind": kind, "q_date": q_date,
                                "source_doc_id": doc.get("id")})
    n_docs = sum(date_kinds.values())
    undated = sum(n for k, n in date_kinds.items() if k not in ("ymd", "d-mon-y", "d.m.y"))
    notes = [
        f"read {len(records)} question records, {n_docs} documents",
        f"{undated} of {n_docs} documents have no usable date and keep published_at=None "
        f"(never 'now'); date forms: {dict(sorted(date_kinds.items()))}",
        "the set's document 'date' is taken as the publication date (published_at)",
        f"q_date is in query_labels and doc_labels ({q_date_missing} questions lack one); "
        f"{after_q_date} dated documents are later than their question's q_date",
        "qrels: cred high gain 1; cred low gain 0 and in bad (CAG's low-credibility / "
        "outdated documents)",
        "answers (query_labels) do not always agree with the high-credibility documents",
        "no provenance: documents carry no url or source type",
    ]
    return out.build(notes + skips.notes())


# ---------------------------------------------------------------- RAMDocs


def read_ramdocs(path: str | Path) -> EvalSet:
    """RAMDocs: per-question pools of documents typed ``correct`` (gain 1), ``misinfo``
    (gain 0, in ``bad``) or ``noise`` (gain 0), each with the ``answer`` it supports.

    Questions have no id in the file: ``qid = "ramdocs-<line number>"``. ``gold_answers``,
    ``wrong_answers`` and ``disambig_entity`` go to ``query_labels``; each document's
    ``type`` and ``answer`` to ``doc_labels`` (answer coverage metrics).
    """
    skips = _Skips()
    out = _PoolBuilder("ramdocs")
    n_records = both = 0
    for lineno, rec in _iter_jsonl(path):
        n_records += 1
        if not isinstance(rec, dict) or not isinstance(rec.get("documents"), list) \
                or _text(rec.get("question")) is None:
            skips.add("question record without question or documents list")
            continue
        qid = f"ramdocs-{lineno:04d}"
        gold = [a for a in rec.get("gold_answers") or [] if isinstance(a, str)]
        wrong = [a for a in rec.get("wrong_answers") or [] if isinstance(a, str)]
        out.add_query(qid, rec["question"].strip(),
                      {"gold_answers": gold, "wrong_answers": wrong,
                       "disambig_entity": rec.get("disambig_entity")})
        for pos, doc in enumerate(rec["documents"]):
            if not isinstance(doc, dict) or _text(doc.get("text")) is None:
                skips.add("document without text")
                continue
            kind = str(doc.get("type", "")).strip().lower()
            if kind not in ("correct", "misinfo", "noise"):
                skips.add("document whose type is not correct/misinfo/noise")
                continue
            answer = doc.get("answer")
            both += kind == "correct" and answer in wrong
            out.add_doc(qid, pos, Document(id=out.doc_id(qid, pos), text=doc["text"].strip()),
                        gain=1 if kind == "correct" else 0, bad=kind == "misinfo",
                        labels={"type": kind, "answer": answer})
    notes = [
        f"read {n_records} question records",
        "qrels: correct documents gain 1; misinfo and noise gain 0; bad = misinfo",
        f"{both} correct documents support an answer also listed in wrong_answers",
        "noise documents have answer 'unknown'",
        "no provenance: documents carry no url or source type",
    ]
    return out.build(notes + skips.notes())


# ---------------------------------------------------------------- CoAID


_COAID_FILE = re.compile(r"News(Fake|Real)COVID-19\.csv", re.IGNORECASE)


def _coaid_files(p: Path) -> list[tuple[str, str, Path]]:
    if p.is_file():
        files = [p]
    else:
        files = [f for f in p.rglob("*.csv") if _COAID_FILE.fullmatch(f.name)]
    out = []
    for f in files:
        m = _COAID_FILE.fullmatch(f.name)
        if not m:
            raise DatasetError(f"path: {f.name} is not a CoAID News{{Fake,Real}}COVID-19.csv")
        out.append((f.parent.name, m[1].lower(), f))
    if not out:
        raise DatasetError(f"path: no News{{Fake,Real}}COVID-19.csv under {p}")

    def release_key(item: tuple[str, str, Path]) -> tuple[Any, ...]:
        m = re.fullmatch(r"(\d{2})-(\d{2})-(\d{4})", item[0])
        day = (int(m[3]), int(m[1]), int(m[2])) if m else (9999, 0, 0)
        return (day, item[0], item[1])

    return sorted(out, key=release_key)


def read_coaid(path: str | Path) -> EvalSet:
    """CoAID COVID-19 news with real/fake labels, for fitting and checking URL priors.

    ``path`` is the CoAID root (all ``<release>/News{Fake,Real}COVID-19.csv``), one release
    folder, or one such file. The label comes from the file name. Text is ``content``, else
    ``abstract``, else ``title``, else ``newstitle`` (which one: ``doc_labels['text_field']``).
    Rows without ``news_url`` are skipped (counted: a URL prior cannot use them); a
    ``(news_url, label)`` pair already read from an earlier release is skipped as a duplicate.
    ``publish_date`` is kept raw in ``doc_labels`` only (see notes). No queries.
    """
    p = _existing(path, "CoAID folder or file")
    skips = _Skips()
    documents: list[Document] = []
    doc_labels: dict[str, dict[str, Any]] = {}
    seen: dict[tuple[str, str], str] = {}
    url_labels: dict[str, set[str]] = {}
    counts: Counter[str] = Counter()
    placeholder = 0
    n_rows = 0
    for release, label, f in _coaid_files(p):
        rows = _read_csv(f, ("news_url", "title", "content"), encoding="utf-8-sig")
        n_rows += len(rows)
        for pos, row in enumerate(rows):
            url = _text(row.get("news_url"))
            if url is None:
                skips.add("row without news_url")
                continue
            if (url, label) in seen:
                skips.add("duplicate (news_url, label) of an earlier release")
                continue
            text_field = next((c for c in ("content", "abstract", "title", "newstitle")
                               if _text(row.get(c))), None)
            if text_field is None:
                skips.add("row without content, abstract or title")
                continue
            doc_id = f"coaid/{release}/{label}/{pos}"
            seen[(url, label)] = doc_id
            url_labels.setdefault(url, set()).add(label)
            counts[label] += 1
            raw_date = _text(row.get("publish_date"))
            placeholder += raw_date == "2/11/20"
            documents.append(Document(id=doc_id, text=row[text_field].strip(),
                                      title=_text(row.get("title")), url=url))
            other_urls = [u for c in ("news_url2", "news_url3", "news_url4", "news_url5")
                          if (u := _text(row.get(c)))]
            doc_labels[doc_id] = {
                "label": label, "fake": label == "fake", "release": release,
                "type": _text(row.get("type")), "fact_check_url": _text(row.get("fact_check_url")),
                "publish_date_raw": raw_date, "text_field": text_field,
                "other_urls": other_urls,
            }
    conflicts = sum(1 for labels in url_labels.values() if len(labels) > 1)
    notes = [
        f"read {n_rows} rows; kept {len(documents)} documents ({counts['real']} real, "
        f"{counts['fake']} fake)",
        "label from the file name (NewsReal / NewsFake); use for URL priors, not as a feature",
        f"{conflicts} urls appear with both labels (both documents kept)",
        "publish_date is not used as published_at: it is mostly empty, mixes formats, and "
        f"'2/11/20' on {placeholder} documents (cdc.gov pages) is a site-wide metadata value, "
        "not a publication date; the raw value is in doc_labels['publish_date_raw']",
        "source_type is not set: derive it from Document.url through provenance",
        "no queries, qrels or bad documents: this set is for priors, not ranking",
    ]
    return _check_consistency(EvalSet(
        name="coaid", documents=documents, queries=[], qrels={}, bad={}, pools=None,
        doc_labels=doc_labels, notes=notes + skips.notes()))


# ---------------------------------------------------------------- pooled-set builder


class _PoolBuilder:
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
        return _check_consistency(EvalSet(
            name=self.name, documents=self.documents, queries=self.queries, qrels=self.qrels,
            bad=self.bad, pools=self.pools, doc_labels=self.doc_labels, notes=notes,
            query_labels=self.query_labels))


# ---------------------------------------------------------------- registry

Reader = Callable[[str | Path], EvalSet]

DATASETS: dict[str, Reader] = {
    "trec2019-hm": read_trec2019_hm,
    "newspolluted": read_newspolluted,
    "cram-nq": read_cram_nq,
    "evotemp": read_evotemp,
    "ramdocs": read_ramdocs,
    "coaid": read_coaid,
}


def load_dataset(name: str, path: str | Path) -> EvalSet:
    """Read set ``name`` from ``path`` (see :data:`DEFAULT_PATHS` for the shared files)."""
    reader = DATASETS.get(name)
    if reader is None:
        raise DatasetError(f"name: unknown dataset {name!r}; known: {sorted(DATASETS)}")
    return reader(path)
