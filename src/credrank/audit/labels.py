"""Which label rows of an audit match what the audit measured (chapter 35.1: "defined
component metrics, missing entries").

Factuality reads harm labels (``doc_id<TAB>query_id``) and fairness reads qrels; a row whose
document id is not in the audited index, or whose query is not one of the audited queries,
can never count: harmful@k and merit are computed over the documents the index returns. Such
rows were dropped without a word, so labels of another index version (``D020`` for
``d020``) made harmful@k 0 and a hard gate passed on labels that matched nothing.

:func:`label_rows` reads every row with its file and line; :func:`check_labels` sorts them
into matched rows, rows naming a document the index does not hold, and rows of queries the
audit did not run. The audit reports the last two (a count and the first
:data:`EXAMPLES` rows, ``file:line``) in ``measurements.json``, its ``--json`` document and on
stderr, and when **no** row matches (an audited query and an indexed document) the dimension
is *not measured*, with a reason naming the file: a gate on it then fails.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

#: how many unmatched rows a report shows
EXAMPLES = 5
#: the label files of the audit: harm labels (factuality), qrels (fairness)
LabelKind = Literal["harm", "qrels"]


@dataclass(frozen=True)
class LabelRow:
    """One label row: where it is and what it names."""

    file: str
    line: int
    query_id: str
    doc_id: str

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "query_id": self.query_id,
                "doc_id": self.doc_id}

    def __str__(self) -> str:
        return f"{self.file}:{self.line} ({self.query_id}, {self.doc_id})"


def label_rows(path: Path, kind: LabelKind, shown: str | None = None) -> list[LabelRow]:
    """Every row of a label file with its line (1-based), in file order, read by the reader
    of its kind (:func:`credrank.demo_corpus.harm_label_rows`,
    :func:`credrank.documents.judgements.qrels_rows`: the same checks, ``.gz`` and BEIR
    folders included); ``shown`` names it in the rows (default: the path)."""
    from credrank.demo_corpus import harm_label_rows
    from credrank.documents.judgements import qrels_rows

    name = str(path) if shown is None else shown
    rows = harm_label_rows(path) if kind == "harm" else qrels_rows(path)
    return [LabelRow(name, line, query_id, doc_id) for line, query_id, doc_id in rows]


@dataclass(frozen=True)
class LabelCheck:
    """The rows of one label file sorted against the audit (module docstring)."""

    file: str
    rows: int
    matched: int
    unknown_documents: tuple[LabelRow, ...]
    unaudited_queries: tuple[LabelRow, ...]

    @property
    def nothing_matches(self) -> bool:
        """No row names an audited query and an indexed document: the labels measure
        nothing."""
        return self.matched == 0

    def to_dict(self) -> dict[str, Any]:
        """``file``, ``rows``, ``matched`` and, for the two kinds of unmatched rows, their
        ``count`` and the first :data:`EXAMPLES` (``file``, ``line``, ``query_id``,
        ``doc_id``)."""
        return {"file": self.file, "rows": self.rows, "matched": self.matched,
                "unknown_documents": _listing(self.unknown_documents),
                "unaudited_queries": _listing(self.unaudited_queries)}

    def warnings(self, what: str) -> list[str]:
        """One line per kind of unmatched row (none when every row matched); ``what`` names
        the labels (``harm labels``)."""
        out = []
        if self.unknown_documents:
            out.append(f"{self.file}: {len(self.unknown_documents)} of {self.rows} {what} "
                       "row(s) name a document the index does not hold, so they count for "
                       f"nothing: {_examples(self.unknown_documents)}")
        if self.unaudited_queries:
            out.append(f"{self.file}: {len(self.unaudited_queries)} of {self.rows} {what} "
                       "row(s) name a query the audit did not run: "
                       f"{_examples(self.unaudited_queries)}")
        return out


def _listing(rows: Sequence[LabelRow]) -> dict[str, Any]:
    return {"count": len(rows), "examples": [r.to_dict() for r in rows[:EXAMPLES]]}


def _examples(rows: Sequence[LabelRow]) -> str:
    shown = ", ".join(f"line {r.line} ({r.query_id}, {r.doc_id})" for r in rows[:EXAMPLES])
    return shown + (", …" if len(rows) > EXAMPLES else "")


def check_labels(file: str, rows: Sequence[LabelRow], indexed: Collection[str],
                 audited: Collection[str]) -> LabelCheck:
    """Sort ``rows`` against the ``indexed`` document ids and the ``audited`` query ids: a
    row matches when both are there; a row naming an unknown document is listed there
    (whatever its query), else a row of a query not audited."""
    unknown = tuple(r for r in rows if r.doc_id not in indexed)
    unaudited = tuple(r for r in rows if r.doc_id in indexed and r.query_id not in audited)
    return LabelCheck(file, len(rows), len(rows) - len(unknown) - len(unaudited), unknown,
                      unaudited)
