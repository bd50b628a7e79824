"""Reader of TREC 2019 Health Misinformation (judged web pages with URLs, usefulness,
credibility and stance labels per topic): a corpus :class:`EvalSet` whose URLs give real
provenance; see :func:`read_trec2019_hm`."""
from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from credrank.documents.schema import Document
from credrank_bench.datasets.base import (
    EvalSet,
    Qrels,
    SkipCounter,
    check_consistency,
    iso_timestamp,
    nonempty_text,
    read_csv_rows,
)

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
    p = Path(path)
    rows = read_csv_rows(p, _TREC_COLUMNS, what="TREC 2019 CSV")
    skips = SkipCounter()
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
        text, url = nonempty_text(row["text"]), nonempty_text(row["url"])
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
        description = nonempty_text(row["description"]) or nonempty_text(row.get("query", ""))
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
            ts = iso_timestamp(row["timestamp"]) if row["timestamp"].strip() else None
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
    return check_consistency(EvalSet(
        name="trec2019-hm", documents=list(docs.values()), queries=queries, qrels=qrels,
        bad=bad, pools=None, doc_labels=doc_labels, notes=notes, query_labels=query_labels))


