"""Reader of RealTimeQA weeks (realtimeqa/realtimeqa_public, ``past/2023/``): multiple-choice
news questions with the week's web search results (URL, title, text, publish date) as each
question's pool; see :func:`read_realtimeqa`."""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from credrank.documents.schema import Document
from credrank.evaluate.answers import squad_normalize
from credrank_bench.datasets.base import (
    DatasetError,
    EvalSet,
    PoolBuilder,
    SkipCounter,
    existing_path,
    iter_jsonl,
    nonempty_text,
    parse_day,
)

QA_SUFFIX = "_qa.jsonl"
GCS_SUFFIX = "_gcs.jsonl"


def week_files(path: str | Path) -> list[tuple[Path, Path]]:
    """``[(qa_file, gcs_file)]`` for ``path``: one ``*_qa.jsonl`` (its ``*_gcs.jsonl`` beside
    it) or a folder holding weeks (every ``*_qa.jsonl`` in it, sorted by name).

    :class:`DatasetError` when the path is neither, a folder has no week, or a week's
    ``*_gcs.jsonl`` is missing."""
    p = existing_path(path, "RealTimeQA week file or folder")
    if p.is_dir():
        qas = sorted(p.glob(f"*{QA_SUFFIX}"))
        if not qas:
            raise DatasetError(f"{p}: no *{QA_SUFFIX} file in this folder; expected RealTimeQA "
                               "weeks (<date>_qa.jsonl with <date>_gcs.jsonl beside it)")
    elif p.name.endswith(QA_SUFFIX):
        qas = [p]
    else:
        raise DatasetError(f"{p}: expected a RealTimeQA *{QA_SUFFIX} file or a folder of them")
    out = []
    for qa in qas:
        gcs = qa.with_name(qa.name[: -len(QA_SUFFIX)] + GCS_SUFFIX)
        if not gcs.is_file():
            raise DatasetError(f"{qa}: the search results file {gcs.name} is missing beside "
                               "it (every week needs both files)")
        out.append((qa, gcs))
    return out


def _answer_index(rec: dict[str, Any], n_choices: int) -> int | None:
    ans = rec.get("answer")
    if isinstance(ans, list) and len(ans) == 1:
        ans = ans[0]
    try:
        k = int(str(ans).strip())
    except ValueError:
        return None
    return k if 0 <= k < n_choices else None


def document_verdict(text: str, choices: list[str], answer: int) -> str:
    """How a document's text relates to a question's choices (whole-token match after SQuAD
    normalisation): ``right`` (the right choice occurs, no wrong one), ``mixed`` (the right
    one and a wrong one), ``wrong`` (only wrong ones) or ``none``."""
    padded = f" {squad_normalize(text)} "
    found = []
    for c in choices:
        norm = squad_normalize(c)
        found.append(bool(norm) and f" {norm} " in padded)
    right = found[answer]
    wrong = any(f for i, f in enumerate(found) if i != answer)
    return ("mixed" if wrong else "right") if right else ("wrong" if wrong else "none")


def read_realtimeqa(path: str | Path) -> EvalSet:
    """RealTimeQA: per question, its own search results as the pool.

    * queries: ``question_sentence``; ``query_labels[qid]``: ``q_date`` (``question_date``
      parsed as a calendar day, :func:`parse_day`), ``choices``, ``answer`` (index of the right
      choice), ``week``, ``n_results`` and ``has_results``;
    * documents: ``url``, ``title``, ``text``; ``published_at`` from ``publish_date``
      (:func:`parse_day`; anything else stays ``None`` and is counted); ``authors`` and the
      raw date go to ``doc_labels``;
    * qrels (a label, for retrieval measures only): gain 1 when the document's verdict
      (:func:`document_verdict`) is ``right`` — it contains the right choice and no wrong one
      as whole tokens after normalisation — else 0; ``bad``: verdict ``wrong``;
    * questions without search results stay in the set with an empty pool
      (``has_results`` false) and are counted in the notes; a question whose search record is
      missing from the ``*_gcs.jsonl`` file is treated the same way and counted separately.
    """
    skips = SkipCounter()
    out = PoolBuilder("realtimeqa")
    date_kinds: Counter[str] = Counter()
    verdicts: Counter[str] = Counter()
    n_questions = n_without = n_no_record = q_date_missing = after_q_date = n_docs = 0
    weeks = week_files(path)
    for qa_file, gcs_file in weeks:
        week = qa_file.name[: -len(QA_SUFFIX)]
        results: dict[str, list[Any]] = {}
        for lineno, rec in iter_jsonl(gcs_file):
            if not isinstance(rec, dict) or rec.get("question_id") is None \
                    or not isinstance(rec.get("search_result"), list):
                skips.add("search record without question_id or search_result list")
                continue
            qid = str(rec["question_id"])
            if qid in results:
                raise DatasetError(f"{gcs_file}:{lineno}: question_id {qid!r} has a second "
                                   "search record")
            results[qid] = rec["search_result"]
        for lineno, rec in iter_jsonl(qa_file):
            question = nonempty_text(rec.get("question_sentence")) if isinstance(rec, dict) \
                else None
            choices = rec.get("choices") if isinstance(rec, dict) else None
            if question is None or rec.get("question_id") is None or not isinstance(
                    choices, list) or len(choices) < 2 \
                    or not all(isinstance(c, str) and c.strip() for c in choices):
                skips.add("question without question_id, question_sentence or >= 2 text "
                          "choices")
                continue
            choices = [c.strip() for c in choices]
            answer = _answer_index(rec, len(choices))
            if answer is None:
                skips.add("question whose answer is not one index of its choices")
                continue
            qid = str(rec["question_id"])
            if qid in out.qrels:
                raise DatasetError(f"{qa_file}:{lineno}: question_id {qid!r} repeats an "
                                   "earlier question")
            q_date, _ = parse_day(rec.get("question_date"))
            q_date_missing += q_date is None
            n_questions += 1
            docs = results.get(qid)
            if docs is None:
                n_no_record += 1
                docs = []
            out.add_query(qid, question, {
                "q_date": q_date, "choices": choices, "answer": answer, "week": week,
                "n_results": len(docs), "has_results": False,
                "source": rec.get("question_source")})
            kept = 0
            for pos, doc in enumerate(docs):
                text = nonempty_text(doc.get("text")) if isinstance(doc, dict) else None
                if text is None:
                    skips.add("search result without text")
                    continue
                raw = doc.get("publish_date")
                published, kind = parse_day(raw)
                date_kinds[kind] += 1
                after_q_date += bool(published and q_date and published > q_date)
                title = nonempty_text(doc.get("title"))
                verdict = document_verdict(f"{title or ''}\n{text}", choices, answer)
                verdicts[verdict] += 1
                out.add_doc(qid, pos, Document(
                    id=out.doc_id(qid, pos), text=text, title=title,
                    url=nonempty_text(doc.get("url")), published_at=published),
                    gain=int(verdict == "right"), bad=verdict == "wrong",
                    labels={"verdict": verdict, "date_raw": raw if isinstance(raw, str)
                            else None, "date_kind": kind, "q_date": q_date,
                            "authors": doc.get("authors")})
                kept += 1
                n_docs += 1
            out.query_labels[qid]["has_results"] = kept > 0
            n_without += kept == 0
    undated = sum(n for k, n in date_kinds.items() if k not in ("ymd", "d-mon-y", "d.m.y"))
    no_url = sum(1 for d in out.documents if d.url is None)
    notes = [
        f"read {len(weeks)} week(s), {n_questions} questions, {n_docs} search results",
        f"{n_without} of {n_questions} questions have no search result (kept with an empty "
        f"pool, never dropped; {n_no_record} of them have no record in the *_gcs.jsonl file)",
        f"{undated} of {n_docs} documents have no usable publish_date and keep "
        f"published_at=None (never 'now'); date forms: {dict(sorted(date_kinds.items()))}",
        f"q_date (question_date) is in query_labels and doc_labels ({q_date_missing} questions "
        f"lack one); {after_q_date} dated documents are later than their question's q_date",
        f"{no_url} documents lack a URL (no provenance for them)",
        "document verdicts (whole-token match of the choices after SQuAD normalisation, title "
        f"and text): {dict(sorted(verdicts.items()))}; qrels gain 1 = 'right' (the right "
        "choice and no wrong one), bad = 'wrong' (a wrong choice and not the right one)",
    ]
    return out.build(notes + skips.notes())
