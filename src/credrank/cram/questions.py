"""CrAM NQ as questions (``credrank cram calibrate --data``): each record's passages in file
order and which one is the fake, read strictly — a malformed record is an error naming its line
and field, never skipped."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from credrank.core.structured import jsonl_values


class CramDataError(ValueError):
    """A CrAM NQ questions file is missing, not JSONL or holds a malformed record."""


@dataclass(frozen=True)
class CramQuestion:
    """One CrAM NQ record: its passages in file order and which one is the fake."""

    qid: str
    question: str
    answers: tuple[str, ...]
    wrong_answer: str
    passages: tuple[str, ...]
    fake: tuple[bool, ...]


def read_cram_questions(path: str | Path) -> list[CramQuestion]:
    """The CrAM NQ JSONL records (``id``, ``question``, ``answers``, ``wrong_answer``,
    ``docs[{text, is_misinformation}]``); :class:`CramDataError` naming the line and field of
    a malformed record. Passages are kept verbatim (stripped of outer whitespace)."""
    out: list[CramQuestion] = []
    seen: set[str] = set()
    for lineno, rec in jsonl_values(path, error=CramDataError):
        where = f"{path}, line {lineno}"
        if not isinstance(rec, dict):
            raise CramDataError(f"{where}: expected a JSON object")
        for key, kind in (("id", (str, int)), ("question", str), ("answers", list),
                          ("wrong_answer", str), ("docs", list)):
            if not isinstance(rec.get(key), kind):
                raise CramDataError(f"{where}: field {key!r} is missing or not a "
                                    f"{kind if isinstance(kind, type) else 'str/int'}")
        qid = str(rec["id"])
        if qid in seen:
            raise CramDataError(f"{where}: field 'id': {qid!r} repeats")
        seen.add(qid)
        passages, fake = [], []
        for i, doc in enumerate(rec["docs"]):
            if not isinstance(doc, dict) or not isinstance(doc.get("text"), str) \
                    or not doc["text"].strip() or not isinstance(doc.get("is_misinformation"),
                                                                 bool):
                raise CramDataError(f"{where}: docs[{i}]: expected text and a boolean "
                                    "is_misinformation")
            passages.append(doc["text"].strip())
            fake.append(doc["is_misinformation"])
        out.append(CramQuestion(qid, rec["question"].strip(),
                                tuple(a for a in rec["answers"] if isinstance(a, str)),
                                rec["wrong_answer"], tuple(passages), tuple(fake)))
    return out


def ideal_scores(q: CramQuestion) -> list[float]:
    """Reference scores that read the labels: 0 for the fake, 1 for a real passage."""
    return [0.0 if f else 1.0 for f in q.fake]


__all__ = ["CramDataError", "CramQuestion", "ideal_scores", "read_cram_questions"]
