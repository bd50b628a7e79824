"""The labels file of ``credrank credibility fit`` and its matching against an index.

**Format**: CSV with a header; a ``doc_id`` or a ``url`` column (both present: ``doc_id`` is
used), ``credible`` (``0``/``1``, also ``true``/``false``, case-insensitive) and an optional
``topic``. It is read as strictly as every CSV credrank reads
(:func:`credrank.core.structured.read_csv`): UTF-8 (a byte-order mark is dropped), a field
never spans lines (an unterminated quote is an error naming the line where the field began,
never a silent swallow of the rows after it), a field over the csv module's 131,072-character
limit is an error naming its line. Errors name ``path:line: column``: an unparsable
``credible``, an empty id or url, an empty ``topic`` when grouping by topic.

**Matching** (:func:`match_labels`): each row's id (or url, compared after stripping spaces) is
looked up in the index, whose stored text and url the model reads. Rows are never dropped
silently: every row is used or counted under a reason in :class:`MatchReport` (``unknown``:
not in the index, with the first few; ``ambiguous_url``: the url names several documents;
``no_host``: grouping by host and the document's url names no web host; ``tie``: a page's
rows in one group disagree evenly — the page's other groups still count).

**Groups**: ``topic`` (the ``topic`` column) or ``host``: the registered domain of the
document's stored url (:func:`credrank.provenance.parse_host`; the host itself where it has
none, e.g. an IP address), so the pages of one site are in one group. The rows of one page in
one group give one label, their majority.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from credrank.core.errors import FileFormatError
from credrank.core.logistic import text_key
from credrank.core.schema import got
from credrank.core.structured import read_csv
from credrank.credibility.model import CredibilityExample
from credrank.index.store import VectorStore
from credrank.learn.cv import majority
from credrank.provenance import parse_host

GROUP_BY = ("topic", "host")
_TRUE = {"1", "true"}
_FALSE = {"0", "false"}
#: examples kept per skip reason in a report
EXAMPLES = 5


@dataclass(frozen=True)
class LabelRow:
    """One data row: its line in the file, the id or url, the label and the topic."""

    line: int
    key: str
    credible: int
    topic: str | None


@dataclass(frozen=True)
class LabelsFile:
    """A parsed labels file: ``by`` is ``doc_id`` or ``url``."""

    path: str
    by: str
    has_topic: bool
    rows: list[LabelRow]


def read_labels(path: str | Path) -> LabelsFile:
    """Parse the labels file at ``path`` (module docstring).

    Declared policy: the file is read by the strict CSV reader
    (:func:`credrank.core.structured.read_csv`: UTF-8 with an optional byte-order mark; a
    quoted field that runs past its line, a field over the csv module's limit or any other
    CSV error is an error naming the line) and must have a ``credible`` column; a row with an
    empty id/url or an unparsable ``credible`` is an error naming ``path:line: column`` (the
    whole file is refused, no row is dropped); every other row becomes a :class:`LabelRow`.
    Errors are :class:`~credrank.core.errors.FileFormatError` (a ``ValueError``).
    """
    path = Path(path)
    rows: list[LabelRow] = []
    by: str | None = None
    has_topic = False
    for line, record in read_csv(path, required=("credible",), what="labels file",
                                 error=FileFormatError):
        if by is None:
            by, has_topic = _key_column(path, list(record)), "topic" in record
        key = (record.get(by) or "").strip()
        if not key:
            raise FileFormatError(f"{path}:{line}: {by}: expected a non-empty value")
        raw = (record.get("credible") or "").strip().lower()
        if raw in _TRUE:
            credible = 1
        elif raw in _FALSE:
            credible = 0
        else:
            raise FileFormatError(f"{path}:{line}: credible: expected 0, 1, true or false; got "
                                  f"{got(record.get('credible'))}")
        topic = (record.get("topic") or "").strip() if has_topic else None
        rows.append(LabelRow(line, key, credible, topic))
    if by is None:
        raise FileFormatError(f"{path}: no data rows after the header")
    return LabelsFile(str(path), by, has_topic, rows)


def _key_column(path: Path, header: Sequence[str]) -> str:
    """``doc_id`` when the header has it, else ``url``; an error naming the header else."""
    for name in ("doc_id", "url"):
        if name in header:
            return name
    raise FileFormatError(f"{path}: header: expected a 'doc_id' or 'url' column; got "
                          f"{', '.join(header)}")


@dataclass
class MatchReport:
    """How the rows of a labels file were used (every row counted once)."""

    rows: int = 0
    used_rows: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    #: used rows whose label lost the majority of their page's rows in a group (the page took
    #: the other label): conflicting duplicates, counted, never silent
    outvoted: int = 0
    outvoted_examples: list[str] = field(default_factory=list)

    def skip(self, reason: str, example: str, rows: int = 1) -> None:
        self.skipped[reason] += rows
        kept = self.examples.setdefault(reason, [])
        if len(kept) < EXAMPLES:
            kept.append(example)

    @property
    def unknown(self) -> int:
        """Rows whose id or url is not in the index."""
        return self.skipped["unknown"]

    def to_dict(self) -> dict[str, Any]:
        """JSON: rows, used rows, unknown count and examples, every skip reason."""
        return {"rows": self.rows, "used_rows": self.used_rows, "unknown": self.unknown,
                "unknown_examples": self.examples.get("unknown", []),
                "skipped": dict(sorted(self.skipped.items())),
                "skipped_examples": {k: v for k, v in sorted(self.examples.items())},
                "outvoted": self.outvoted, "outvoted_examples": list(self.outvoted_examples)}


def page_group(url: str | None) -> str | None:
    """The ``host`` group of a page: the registered domain of its url, else its host;
    ``None`` when the url names no web host."""
    if not url:
        return None
    host, registered = parse_host(str(url))
    return registered or host


def match_labels(labels: LabelsFile, store: VectorStore, group_by: str = "topic"
                 ) -> tuple[list[CredibilityExample], MatchReport]:
    """The labelled pages of ``labels`` found in ``store`` as examples (labels per group), in
    first-seen order, and the report of every row (module docstring)."""
    if group_by not in GROUP_BY:
        raise ValueError(f"group_by: expected one of {', '.join(GROUP_BY)}, got {group_by!r}")
    if group_by == "topic":
        if not labels.has_topic:
            raise ValueError(f"{labels.path}: --group-by topic needs a 'topic' column; the "
                             "file has none (add one, or use --group-by host)")
        for row in labels.rows:
            if not row.topic:
                raise ValueError(f"{labels.path}:{row.line}: topic: expected a non-empty value "
                                 "(grouping by topic)")
    report = MatchReport(rows=len(labels.rows))
    keys = list(dict.fromkeys(r.key for r in labels.rows))
    if labels.by == "doc_id":
        found = {str(p["doc_id"]): [str(p["doc_id"])]
                 for p in store.read_payloads(keys, fields=("doc_id",))}
    else:
        wanted = set(keys)
        found = defaultdict(list)
        for p in store.read_payloads(None, fields=("doc_id", "url")):
            url = (p.get("url") or "").strip()
            if url in wanted:
                found[url].append(str(p["doc_id"]))
    ids = sorted({d for key in keys for d in found.get(key, []) if len(found[key]) == 1})
    pages = {str(p["doc_id"]): p for p in store.read_payloads(ids, fields=("doc_id", "url",
                                                                           "text", "title"))}
    votes: dict[str, dict[str, list[int]]] = {}
    lines: dict[tuple[str, str], list[int]] = defaultdict(list)
    for row in labels.rows:
        where = f"line {row.line}: {row.key}"
        matches = found.get(row.key, [])
        if not matches:
            report.skip("unknown", where)
            continue
        if len(matches) > 1:
            report.skip("ambiguous_url", f"{where} ({len(matches)} documents)")
            continue
        doc = matches[0]
        page = pages[doc]
        if not isinstance(page.get("text"), str):
            report.skip("no_text", where)
            continue
        group = row.topic if group_by == "topic" else page_group(page.get("url"))
        if not group:
            report.skip("no_host", f"{where} (url {page.get('url')!r})")
            continue
        votes.setdefault(doc, {}).setdefault(group, []).append(row.credible)
        lines[(doc, group)].append(row.line)
    examples = []
    for doc, by_group in votes.items():
        labels_of: dict[str, int] = {}
        for group, values in by_group.items():
            label = majority(values)  # the one duplicate policy of every learned stage
            if label is None:
                report.skip("tie", f"lines {lines[(doc, group)]}: {doc} in {group}",
                            rows=len(values))
                continue
            labels_of[group] = label
            report.used_rows += len(values)
            lost = sum(1 for v in values if v != labels_of[group])
            if lost:  # rows that disagree with the majority of their page's rows
                report.outvoted += lost
                if len(report.outvoted_examples) < EXAMPLES:
                    report.outvoted_examples.append(
                        f"lines {lines[(doc, group)]}: {doc} in {group}: {lost} of "
                        f"{len(values)} rows outvoted")
        if labels_of:
            page = pages[doc]
            url, title = page.get("url"), page.get("title")
            examples.append(CredibilityExample(doc, page["text"],
                                               None if url is None else str(url), labels_of,
                                               title=title if isinstance(title, str) else None))
    return examples, report


def training_hash(examples: Sequence[CredibilityExample]) -> str:
    """sha256 over the sorted ``doc_id, group, label, text hash, url`` rows of ``examples``:
    the same labelled pages give the same hash, a changed label or text another."""
    rows = sorted(f"{e.doc_id}\t{g}\t{y}\t{text_key(e.text)}\t{e.url or ''}"
                  for e in examples for g, y in e.labels.items())
    return hashlib.sha256("\n".join(rows).encode("utf-8")).hexdigest()
