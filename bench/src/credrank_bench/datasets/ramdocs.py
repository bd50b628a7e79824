"""Reader of RAMDocs (ambiguous questions with correct, misinformation and noise documents,
each supporting an answer): a pooled :class:`EvalSet` for misinformation demotion together with
answer (intent) coverage; see :func:`read_ramdocs`."""
from __future__ import annotations

from pathlib import Path

from credrank.documents.schema import Document
from credrank_bench.datasets.base import (
    EvalSet,
    PoolBuilder,
    SkipCounter,
    check_shape,
    iter_jsonl,
    nonempty_text,
)

# ---------------------------------------------------------------- RAMDocs


def read_ramdocs(path: str | Path) -> EvalSet:
    """RAMDocs: per-question pools of documents typed ``correct`` (gain 1), ``misinfo``
    (gain 0, in ``bad``) or ``noise`` (gain 0), each with the ``answer`` it supports.

    Questions have no id in the file: ``qid = "ramdocs-<line number>"``. ``gold_answers``,
    ``wrong_answers`` and ``disambig_entity`` go to ``query_labels``; each document's
    ``type`` and ``answer`` to ``doc_labels`` (answer coverage metrics).
    """
    skips = SkipCounter()
    out = PoolBuilder("ramdocs")
    n_records = both = 0
    rows = list(iter_jsonl(path))
    check_shape("ramdocs", path, [rec for _, rec in rows])
    for lineno, rec in rows:
        n_records += 1
        if not isinstance(rec, dict) or not isinstance(rec.get("documents"), list) \
                or nonempty_text(rec.get("question")) is None:
            skips.add("question record without question or documents list")
            continue
        qid = f"ramdocs-{lineno:04d}"
        gold = [a for a in rec.get("gold_answers") or [] if isinstance(a, str)]
        wrong = [a for a in rec.get("wrong_answers") or [] if isinstance(a, str)]
        out.add_query(qid, rec["question"].strip(),
                      {"gold_answers": gold, "wrong_answers": wrong,
                       "disambig_entity": rec.get("disambig_entity")})
        for pos, doc in enumerate(rec["documents"]):
            if not isinstance(doc, dict) or nonempty_text(doc.get("text")) is None:
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


