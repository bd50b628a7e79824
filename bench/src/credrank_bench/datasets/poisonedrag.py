"""PoisonedRAG targets (``poisonedrag/nq.json``) and the poisoned corpus built from them.

PoisonedRAG (Zou et al., 2024; sleeepeer/PoisonedRAG, MIT) ships, per target question, a
correct answer, an attacker-chosen incorrect answer and five adversarial texts written to be
retrieved for the question and to make a reader give the incorrect answer. It ships no clean
passages, so :func:`poisoned_corpus` injects the adversarial texts into a clean corpus supplied
by the caller (the bench uses the real Wikipedia passages of CrAM NQ with its fakes removed).
Two inputs make it a different shape from the one-path readers of
:data:`~credrank_bench.datasets.registry.DATASETS`, so it is not registered there: read the targets
with :func:`read_poisonedrag`, then build the set with :func:`poisoned_corpus`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from credrank.core.validation import check_choice, check_int
from credrank.documents.schema import Document
from credrank.evaluate.answers import squad_normalize
from credrank_bench.datasets.base import (
    DatasetError,
    EvalSet,
    SkipCounter,
    check_consistency,
    contains_answer,
    nonempty_text,
    read_data_text,
)

#: prefix of injected documents' ids: ``poison:<qid>:<i>`` (``i`` from 0, file order)
POISON_PREFIX = "poison:"
#: how an injected text is written: alone, or after its target question (the black-box attack)
PREFIXES = ("none", "question")
#: the fields every target record needs, as the file spells them
CORRECT, INCORRECT, ADV = "correct answer", "incorrect answer", "adv_texts"
#: how many per-record problems are spelled out in the notes (all are counted)
_SHOWN_PROBLEMS = 10


@dataclass(frozen=True)
class PoisonTarget:
    """One target question: its id, text, correct and incorrect answers and adversarial
    texts (file order); ``key`` is the record's key in the file."""

    qid: str
    question: str
    correct: str
    incorrect: str
    adv_texts: tuple[str, ...]
    key: str


@dataclass(frozen=True)
class PoisonTargets:
    """The usable targets of one file, with notes saying what was read and skipped."""

    path: str
    targets: list[PoisonTarget]
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.targets)


def poison_id(qid: str, i: int) -> str:
    """The document id of adversarial text ``i`` (0-based) of target ``qid``."""
    return f"{POISON_PREFIX}{qid}:{i}"


def _type(value: Any) -> str:
    return "missing" if value is None else type(value).__name__


def _problem(rec: Any) -> tuple[str, str] | None:
    """``(reason counted, detail)`` when a record is unusable, else ``None``."""
    if not isinstance(rec, dict):
        return ("record is not a JSON object", f"expected an object; got {_type(rec)}")
    for name in ("question", CORRECT, INCORRECT):
        if nonempty_text(rec.get(name)) is None:
            got = rec.get(name)
            return (f"record without a non-empty string {name!r}",
                    f"{name!r}: expected a non-empty string; got "
                    f"{_type(got) if not isinstance(got, str) else repr(got)}")
    adv = rec.get(ADV)
    if adv is None:
        return (f"record without {ADV!r}", f"{ADV!r}: missing")
    if not isinstance(adv, list) or not adv:
        return (f"record whose {ADV!r} is not a non-empty list",
                f"{ADV!r}: expected a non-empty list of strings; got {_type(adv)}"
                + (" (empty)" if isinstance(adv, list) else ""))
    bad = [i for i, t in enumerate(adv) if nonempty_text(t) is None]
    if bad:
        return (f"record with an {ADV!r} entry that is not a non-empty string",
                f"{ADV!r}[{bad[0]}]: expected a non-empty string; got {_type(adv[bad[0]])}")
    rid = rec.get("id")
    if rid is not None and not (isinstance(rid, str) and rid.strip()) and not (
            isinstance(rid, int) and not isinstance(rid, bool)):
        return ("record whose 'id' is not a string or integer",
                f"'id': expected a string or integer; got {_type(rid)}")
    return None


def read_poisonedrag(path: str | Path) -> PoisonTargets:
    """The target records of a PoisonedRAG ``adv_targeted_results`` file (e.g. ``nq.json``).

    The file is a JSON object ``{key: {id, question, "correct answer", "incorrect answer",
    adv_texts: [str, ...]}}``. A record lacking a field, or with a field of the wrong type, is
    skipped and counted by reason (the first few named with key, position and field in the
    notes); a key repeated in the file (JSON keeps the last value) and an id repeated by a later
    record are counted too. ``qid`` is the record's ``id`` (its key when it has none).

    Raises :class:`DatasetError` when the file is missing, not JSON or not a JSON object.
    """
    p = Path(path)
    text = read_data_text(p, "PoisonedRAG JSON file")
    repeated: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in items:
            if k in out:
                repeated.append(k)
            out[k] = v
        return out

    try:
        data = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{p}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise DatasetError(f"{p}: expected a JSON object of target records keyed by id "
                           f"(PoisonedRAG adv_targeted_results); got {_type(data)}")
    skips = SkipCounter()
    problems: list[str] = []
    top_repeats = [k for k in repeated if k in data]
    if top_repeats:
        skips.add("record whose key repeats an earlier key (JSON keeps only the last)",
                  len(top_repeats))
        problems += [f"key {k!r}: repeated in the file; the last record is read"
                     for k in top_repeats]
    targets: list[PoisonTarget] = []
    seen: set[str] = set()
    for pos, (key, rec) in enumerate(data.items(), 1):
        found = _problem(rec)
        if found is not None:
            skips.add(found[0])
            problems.append(f"record {pos} (key {key!r}): {found[1]}")
            continue
        qid = str(rec["id"]).strip() if rec.get("id") is not None else key
        if rec.get("id") is None:
            skips.fix("record without 'id': its key is the qid")
        elif qid != key:
            skips.fix("record whose 'id' differs from its key: the id is the qid")
        if qid in seen:
            skips.add("record whose id repeats an earlier record's id")
            problems.append(f"record {pos} (key {key!r}): id {qid!r} repeats an earlier record")
            continue
        seen.add(qid)
        targets.append(PoisonTarget(
            qid=qid, question=rec["question"].strip(), correct=rec[CORRECT].strip(),
            incorrect=rec[INCORRECT].strip(),
            adv_texts=tuple(t.strip() for t in rec[ADV]), key=key))
    n_adv = sorted({len(t.adv_texts) for t in targets})
    notes = [f"read {len(data)} target records from {p.name}: {len(targets)} usable, "
             f"{len(data) - len(targets)} skipped; adversarial texts per target: "
             f"{', '.join(map(str, n_adv)) or 'none'}"]
    if problems:
        shown = problems[:_SHOWN_PROBLEMS]
        more = len(problems) - len(shown)
        notes.append("skipped records: " + "; ".join(shown)
                     + (f"; and {more} more" if more else ""))
    return PoisonTargets(str(p), targets, notes + skips.notes())


def poisoned_corpus(targets: PoisonTargets | Sequence[PoisonTarget],
                    clean: EvalSet | Sequence[Document], n_inject: int = 5, *,
                    prefix: str = "none") -> EvalSet:
    """One corpus: the clean passages plus the first ``n_inject`` adversarial texts of every
    target.

    * ``clean``: an :class:`EvalSet` (its documents labelled bad for any question are
      removed, e.g. CrAM's GPT fakes) or a list of documents, all taken as clean. A passage
      whose text repeats an earlier one exactly is dropped (counted in the notes), so
      retrieval never shows the same text twice.
    * injected documents: ``poison:<qid>:<i>`` for ``i < n_inject`` (a target with fewer
      texts injects all of them, counted), in ``bad[qid]`` of their own target only, gain 0.
    * queries: the target questions; qrels: gain 1 for a clean passage containing the
      correct answer after SQuAD normalisation (:func:`contains_answer`), gain 0 for the
      target's own poisons.
    * ``prefix``: ``none`` (the adversarial text alone) or ``question`` (PoisonedRAG's
      black-box attack, Zou et al. 2024 §4.2: the injected text is ``S ⊕ I``, the target
      question ``S`` prepended to the crafted text ``I`` so that it is retrieved).
    * labels: ``query_labels[qid]`` holds ``correct``, ``incorrect``, ``answers``,
      ``wrong_answer``, ``n_injected`` and ``clean_answer_passages``;
      ``doc_labels[doc]`` holds ``poison`` (bool) and, for poisons, ``target``, ``index`` and
      ``mentions_incorrect``; for clean passages, ``origin`` (the set they came from).
    """
    n_inject = check_int("n_inject", n_inject, 0)
    prefix = check_choice("prefix", prefix, PREFIXES)
    tlist = list(targets.targets if isinstance(targets, PoisonTargets) else targets)
    notes = list(targets.notes) if isinstance(targets, PoisonTargets) else []
    skips = SkipCounter()
    if isinstance(clean, EvalSet):
        removed = set().union(*clean.bad.values()) if clean.bad else set()
        source = [d for d in clean.documents if d.id not in removed]
        origin = clean.name
        notes.append(f"clean corpus: {len(clean.documents)} documents of {clean.name}, "
                     f"{len(clean.documents) - len(source)} labelled bad there removed")
    else:
        source, origin = list(clean), "documents"
        notes.append(f"clean corpus: {len(source)} documents given by the caller")
    documents: list[Document] = []
    doc_labels: dict[str, dict[str, Any]] = {}
    texts: set[str] = set()
    for d in source:
        if d.id.startswith(POISON_PREFIX):
            raise DatasetError(f"clean document {d.id!r}: ids beginning {POISON_PREFIX!r} are "
                               "reserved for injected texts")
        if d.text in texts:
            skips.add("clean passage whose text repeats an earlier passage exactly")
            continue
        texts.add(d.text)
        documents.append(d)
        doc_labels[d.id] = {"poison": False, "origin": origin}
    n_clean = len(documents)
    queries: list[tuple[str, str]] = []
    qrels: dict[str, dict[str, int]] = {}
    bad: dict[str, set[str]] = {}
    query_labels: dict[str, dict[str, Any]] = {}
    short = 0
    # contains_answer's rule, with each passage normalised once rather than once per target
    padded = [(d.id, f" {squad_normalize(d.text)} ") for d in documents]
    for t in tlist:
        norm = f" {squad_normalize(t.correct)} "
        relevant = {i: 1 for i, text in padded if norm.strip() and norm in text}
        k = min(n_inject, len(t.adv_texts))
        short += k < n_inject
        ids = [poison_id(t.qid, i) for i in range(k)]
        for i, pid in enumerate(ids):
            text = (f"{t.question} {t.adv_texts[i]}" if prefix == "question"
                    else t.adv_texts[i])
            documents.append(Document(id=pid, text=text))
            doc_labels[pid] = {"poison": True, "target": t.qid, "index": i,
                               "mentions_incorrect": contains_answer(t.adv_texts[i],
                                                                     [t.incorrect])}
        queries.append((t.qid, t.question))
        qrels[t.qid] = {**relevant, **dict.fromkeys(ids, 0)}
        bad[t.qid] = set(ids)
        query_labels[t.qid] = {"correct": t.correct, "incorrect": t.incorrect,
                               "answers": [t.correct], "wrong_answer": t.incorrect,
                               "n_injected": k, "clean_answer_passages": len(relevant),
                               "key": t.key}
    if short:
        skips.fix(f"target with fewer than n_inject={n_inject} adversarial texts (all of its "
                  "texts injected)", short)
    with_answer = sum(1 for q in query_labels.values() if q["clean_answer_passages"])
    notes += [
        f"{n_clean} clean passages and {len(documents) - n_clean} injected texts "
        f"(the first {n_inject} adversarial texts of each of {len(tlist)} targets, ids "
        f"'{POISON_PREFIX}<qid>:<i>', prefix {prefix!r}); a poison is bad only for its own "
        "target question",
        "relevance: a clean passage containing the target's correct answer after SQuAD "
        "normalisation (whole tokens) has gain 1 (short answers such as numbers can match "
        "passages about something else); injected texts have gain 0",
        f"{with_answer} of {len(tlist)} target questions have at least one clean passage "
        "containing the correct answer",
    ]
    return check_consistency(EvalSet(
        name="poisonedrag", documents=documents, queries=queries, qrels=qrels, bad=bad,
        pools=None, doc_labels=doc_labels, notes=notes + skips.notes(),
        query_labels=query_labels))


def same_questions(targets: PoisonTargets | Sequence[PoisonTarget], other: EvalSet) -> int:
    """How many targets ask a question of ``other`` (same text after SQuAD normalisation)."""
    tlist = targets.targets if isinstance(targets, PoisonTargets) else targets
    known = {squad_normalize(text) for _, text in other.queries}
    return sum(1 for t in tlist if squad_normalize(t.question) in known)
