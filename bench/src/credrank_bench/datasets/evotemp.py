"""Reader of CAG EvoTemp (time-sensitive questions with a question date and seven dated news
documents each, credibility high or low): a pooled :class:`EvalSet` for freshness weighting and
the unknown-age policy; see :func:`read_evotemp`."""
from __future__ import annotations

from collections import Counter
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
    parse_day,
    question_qid,
)

# ---------------------------------------------------------------- CAG: EvoTemp


def read_evotemp(path: str | Path) -> EvalSet:
    """CAG EvoTemp: per-question pools of 7 dated news documents, ``cred`` high (gain 1) or
    low (gain 0, in ``bad``: outdated or low-credibility for the question's date).

    The document ``date`` becomes ``published_at`` when it is an unambiguous calendar day
    (:func:`parse_day`); undated, relative ("5 days ago"), year-only and ambiguous dates stay
    ``None`` (raw value in ``doc_labels['date_raw']``). ``q_date`` goes to
    ``query_labels[qid]['q_date']`` and to each document's ``doc_labels['q_date']``.
    """
    records = load_json_list(path)
    check_shape("evotemp", path, records)
    skips = SkipCounter()
    seen: dict[str, Any] = {}
    out = PoolBuilder("evotemp")
    date_kinds: Counter[str] = Counter()
    q_date_missing = after_q_date = 0
    for rec in records:
        qid = question_qid(rec, seen, skips)
        if qid is None:
            continue
        q_date, _ = parse_day(rec.get("q_date"))
        q_date_missing += q_date is None
        answers = [a.strip() if isinstance(a, str) else [str(x).strip() for x in a]
                   for a in rec.get("answers") or [] if isinstance(a, str | list)]
        out.add_query(qid, rec["question"].strip(), {"q_date": q_date, "answers": answers})
        for pos, doc in enumerate(rec["docs"]):
            if not isinstance(doc, dict) or nonempty_text(doc.get("text")) is None:
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
                                           title=nonempty_text(doc.get("title")),
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


