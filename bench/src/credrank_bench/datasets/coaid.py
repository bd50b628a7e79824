"""Reader of CoAID (COVID-19 news and claims labelled real or fake, by release): the items
with their URLs for fitting per-type priors on earlier releases; see :func:`read_coaid`."""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from credrank.documents.schema import Document
from credrank_bench.datasets.base import (
    DatasetError,
    EvalSet,
    SkipCounter,
    check_consistency,
    existing_path,
    nonempty_text,
    read_csv_rows,
)

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
            raise DatasetError(f"{f}: expected a CoAID News{{Fake,Real}}COVID-19.csv, got the "
                               f"file name {f.name!r}")
        out.append((f.parent.name, m[1].lower(), f))
    if not out:
        raise DatasetError(f"{p}: expected the CoAID root (release folders holding "
                           "News{Fake,Real}COVID-19.csv), got a folder with no "
                           "News{Fake,Real}COVID-19.csv in it")

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
    p = existing_path(path, "CoAID folder or file")
    skips = SkipCounter()
    documents: list[Document] = []
    doc_labels: dict[str, dict[str, Any]] = {}
    seen: dict[tuple[str, str], str] = {}
    url_labels: dict[str, set[str]] = {}
    counts: Counter[str] = Counter()
    placeholder = 0
    n_rows = 0
    for release, label, f in _coaid_files(p):
        rows = read_csv_rows(f, ("news_url", "title", "content"), what="CoAID CSV")
        n_rows += len(rows)
        for pos, row in enumerate(rows):
            url = nonempty_text(row.get("news_url"))
            if url is None:
                skips.add("row without news_url")
                continue
            if (url, label) in seen:
                skips.add("duplicate (news_url, label) of an earlier release")
                continue
            text_field = next((c for c in ("content", "abstract", "title", "newstitle")
                               if nonempty_text(row.get(c))), None)
            if text_field is None:
                skips.add("row without content, abstract or title")
                continue
            doc_id = f"coaid/{release}/{label}/{pos}"
            seen[(url, label)] = doc_id
            url_labels.setdefault(url, set()).add(label)
            counts[label] += 1
            raw_date = nonempty_text(row.get("publish_date"))
            placeholder += raw_date == "2/11/20"
            documents.append(Document(id=doc_id, text=row[text_field].strip(),
                                      title=nonempty_text(row.get("title")), url=url))
            other_urls = [u for c in ("news_url2", "news_url3", "news_url4", "news_url5")
                          if (u := nonempty_text(row.get(c)))]
            doc_labels[doc_id] = {
                "label": label, "fake": label == "fake", "release": release,
                "type": nonempty_text(row.get("type")),
                "fact_check_url": nonempty_text(row.get("fact_check_url")),
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
    return check_consistency(EvalSet(
        name="coaid", documents=documents, queries=[], qrels={}, bad={}, pools=None,
        doc_labels=doc_labels, notes=notes + skips.notes()))


