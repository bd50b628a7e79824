"""Reader of CrAM NQ (reconstructed): 1,000 Natural Questions, each with a pool of four real
Wikipedia passages retrieved for it and one GPT-written fake (``is_misinformation``, most
beginning ``"CNN news:"``) that asserts the record's ``wrong_answer``, plus CrAM's per-passage
GPT truthfulness score. :func:`read_cram_nq` returns it as a pooled :class:`EvalSet` (fakes in
``bad``, gain 1 for a real passage containing a gold answer); the PoisonedRAG bench reuses its
real passages, fakes removed, as a clean corpus of real Wikipedia text."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from credrank.documents.schema import Document
from credrank_bench.datasets.base import (
    EvalSet,
    PoolBuilder,
    SkipCounter,
    check_shape,
    contains_answer,
    iter_jsonl,
    nonempty_text,
    question_qid,
)

# ---------------------------------------------------------------- CrAM NQ


def read_cram_nq(path: str | Path) -> EvalSet:
    """CrAM NQ (reconstructed): per-question pools of 4 retrieved Wikipedia passages and one
    injected GPT-written fake (``is_misinformation``, in ``bad``, gain 0).

    Relevance rule: a passage that is not misinformation and contains one of ``answers`` after
    SQuAD normalisation (:func:`contains_answer`, whole tokens) has gain 1; others gain 0.
    The ``"CNN news:"`` prefix of most fakes is left in the text (it is the attack) and never
    sets provenance.
    """
    skips = SkipCounter()
    seen: dict[str, Any] = {}
    out = PoolBuilder("cram-nq")
    n_records = cnn_fakes = n_fakes = 0
    fake_first = 0
    rows = list(iter_jsonl(path))
    check_shape("cram-nq", path, [rec for _, rec in rows])
    for lineno, rec in rows:
        n_records += 1
        qid = question_qid(rec, seen, skips, need_answers=True)
        if qid is None:
            continue
        answers = [a for a in rec["answers"] if isinstance(a, str)]
        out.add_query(qid, rec["question"].strip(),
                      {"answers": answers, "wrong_answer": rec.get("wrong_answer"),
                       "line": lineno})
        for pos, doc in enumerate(rec["docs"]):
            if not isinstance(doc, dict) or nonempty_text(doc.get("text")) is None \
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
