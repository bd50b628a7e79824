"""Reader of CAG NewsPolluted (news questions with one real snippet and LLM-written fakes,
the leaked credibility label stripped): a pooled :class:`EvalSet`; see
:func:`read_newspolluted`."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from credrank.documents.schema import Document
from credrank_bench.datasets.base import (
    EvalSet,
    PoolBuilder,
    SkipCounter,
    check_shape,
    load_json_list,
    nonempty_text,
    question_qid,
    strip_leaked_label,
)

# ---------------------------------------------------------------- CAG: NewsPolluted


def read_newspolluted(path: str | Path) -> EvalSet:
    """CAG NewsPolluted: per-question pools of one real news snippet (``cred: high``,
    relevant, gain 1) and LLM-written fakes (``cred: low``, gain 0, in ``bad``).

    The leaked label ``(High|Middle|Medium|Low) credibility of text:`` is removed from every
    text and title *before* a Document is built (:func:`strip_leaked_label`). No provenance.
    """
    records = load_json_list(path)
    check_shape("newspolluted", path, records)
    skips = SkipCounter()
    seen: dict[str, Any] = {}
    out = PoolBuilder("newspolluted")
    stripped_docs = stripped_total = 0
    for rec in records:
        qid = question_qid(rec, seen, skips)
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
            if nonempty_text(text) is None:
                skips.add("document empty after removing the leaked label")
                continue
            out.add_doc(qid, pos, Document(id=out.doc_id(qid, pos), text=text.strip(),
                                           title=nonempty_text(title)),
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


