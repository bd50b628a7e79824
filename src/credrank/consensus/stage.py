"""``AnswerConsensus``: label-free answer consensus over one query's candidates (chapter 35.3).

For a question-style query the stage

1. reads each candidate passage's answer with a *passage reader* (default
   :func:`extractive_answers`, the offline :class:`~credrank.generate.llm.ExtractiveReader`
   on that passage alone; :func:`generator_answers` puts any
   :class:`~credrank.generate.llm.Generator` behind the same call);
2. merges equivalent answers with the declared rule
   :class:`~credrank.reliability.equivalence.AnswerEquivalence` (abstentions such as
   ``I don't know`` are no answer);
3. collapses near-duplicate passages into one voice
   (:func:`~credrank.consensus.duplicates.duplicate_groups`: word 3-gram Jaccard ≥ 0.5, and
   optionally embedding cosine ≥ a stated threshold);
4. weighs each voice by ``w_d = max(sim_d, 0) · Π_f λ_{f,d}`` over the credibility factors
   the batch already has among ``weight_factors`` (default ``prior``, ``credibility``,
   ``reliability``; a factor the batch lacks counts as 1 and the note in ``info`` says so);
5. votes (:func:`~credrank.consensus.vote.weighted_vote`) and adds the factor ``consensus``
   ``f_d = floor + (1 − floor) · s_{c_d} / s*`` (:func:`~credrank.consensus.vote.consensus_factor`).

**Calibrated abstention.** When the top answer's share ``s*`` is at or below ``threshold``
(chosen on a development split by :func:`~credrank.consensus.calibrate.choose_threshold`), the
batch's
``info["consensus"]["status"]`` is ``contested`` and ``answers`` lists every competing answer
with its share and supporting passages; with ``on_contested="neutral"`` (default) the factor is
1 for every passage, so no side is silently picked; ``"apply"`` applies it anyway. ``no
answers`` (no passage answers) leaves the ranking unchanged.

The extracted answer of each passage is kept in the meta column ``answer`` (``None`` for no
answer) and its duplicate group in ``answer_group``. A pool larger than
:attr:`AnswerConsensus.max_pool` still runs, with a
:class:`~credrank.select.budget.PoolSizeWarning` and the same sentence in
``info["consensus"]["warnings"]``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from credrank.consensus.duplicates import JACCARD, SHINGLE, duplicate_groups
from credrank.consensus.vote import AGREED, NO_ANSWERS, consensus_factor, weighted_vote
from credrank.core.candidates import Candidates, StageError
from credrank.core.pipeline import Stage
from credrank.core.schema import Field, Integer, ListOf, Nullable, Number, Table, Text
from credrank.core.validation import check_choice, check_int, check_probability
from credrank.generate.llm import (  # the reader's own split, words and stems (one rule)
    _SENTENCE,
    _STOPWORDS,
    _WORD,
    ExtractiveReader,
    Generator,
    _stem,
    build_prompt,
)
from credrank.reliability.equivalence import AnswerEquivalence
from credrank.select.budget import pool_warnings

#: ``reader(query, passages) -> one answer per passage``
PassageReader = Callable[[str, Sequence[str]], list[str]]

WEIGHT_FACTORS = ("prior", "credibility", "reliability")
ON_CONTESTED = ("neutral", "apply")

_READER = ExtractiveReader()


#: the reader's word stems, kept across calls (a pure function of the word; bounded memory)
_stem_cached = functools.lru_cache(maxsize=1 << 17)(_stem)


def extractive_answers(query: str, passages: Sequence[str]) -> list[str]:
    """The offline reader's answer of ``query`` from each passage alone (its rule:
    :class:`~credrank.generate.llm.ExtractiveReader`), equal to
    ``[ExtractiveReader().answer(query, [p]) for p in passages]``.

    Faster on a large pool: the best sentence of every passage is found here by the reader's
    own rule (most distinct question content words, the earliest on ties), each distinct word
    stemmed once (a bounded cache kept across calls); a passage whose best sentence shares no
    content word gets the reader's abstention; the reader then extracts the answer from the
    best sentence alone (a sentence of the reader's split is its own split, so its answer is
    the passage's). The private helpers of :mod:`credrank.generate.llm` are imported so that
    the rule stays one; ``tests/test_consensus_scale.py`` checks the equality."""
    q_words = set(map(_stem_cached, _WORD.findall(query)))
    content = {w for w in q_words if w and w not in _STOPWORDS}
    abstain = _READER.answer(query, [""])
    out = []
    for passage in passages:
        best, best_score = "", 0
        for sentence in _SENTENCE.split(passage.strip()):
            score = len(content.intersection(map(_stem_cached, _WORD.findall(sentence))))
            if score > best_score:
                best, best_score = sentence, score
        out.append(_READER.answer(query, [best]) if best_score else abstain)
    return out


def generator_answers(generator: Generator, *, max_tokens: int = 32) -> PassageReader:
    """A passage reader that asks ``generator`` once per passage with
    :func:`~credrank.generate.llm.build_prompt` (question + that passage)."""
    max_tokens = check_int("max_tokens", max_tokens, 1)

    def read(query: str, passages: Sequence[str]) -> list[str]:
        return [generator.generate(build_prompt(query, [p]), max_tokens=max_tokens).text
                for p in passages]
    read.__name__ = f"generator_answers({type(generator).__name__})"
    return read


def _members(labels: np.ndarray, count: int) -> list[np.ndarray]:
    """``out[c]`` = the rows with ``labels == c`` (ascending), for ``c < count``; negative
    labels belong to no entry. One sort instead of a scan per label."""
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(count + 1))
    return [order[bounds[c]:bounds[c + 1]] for c in range(count)]


class AnswerConsensus(Stage):
    """Adds the factor ``consensus`` (module docstring).

    Args:
        reader: passage reader (default :func:`extractive_answers`).
        equivalence: the answer-equivalence rule (default: normalisation only).
        weight_factors: factors multiplied into the vote weight where the batch has them.
        floor: the factor of an answer no voice supports, in ``[0, 1]``.
        unanswered: the factor of a passage without an answer (default 1: unchanged).
        threshold: ``s* ≤ threshold`` is ``contested`` (1: never commit).
        on_contested: ``neutral`` (factor 1 when contested) or ``apply``.
        jaccard, shingle: the text near-duplicate test; ``jaccard=1`` merges only passages
            with identical shingle sets.
        cosine: optional embedding near-duplicate threshold (needs the batch's vectors).
        name: the factor's name.
    """

    SPEC = Table({
        "threshold": Field(Number(0.0, 1.0), default=0.5),
        "floor": Field(Number(0.0, 1.0), default=0.1),
        "unanswered": Field(Number(0.0, 1.0), default=1.0),
        "on_contested": Field(Text(choices=ON_CONTESTED), default="neutral"),
        "jaccard": Field(Number(0.0, 1.0), default=JACCARD),
        "shingle": Field(Integer(1, 64), default=SHINGLE),
        "cosine": Field(Nullable(Number(0.0, 1.0)), default=None),
        "weight_factors": Field(ListOf(Text()), default=list(WEIGHT_FACTORS)),
    })

    #: the largest pool handled within the budget: the reader is ``O(N)`` (one passage at a
    #: time), the copy test ``O(W log W)`` plus its candidate pairs (prefix filtering)
    max_pool = 5_000

    def formula_term(self) -> str:
        return "needs the Python path (it reads each candidate's answer)"

    @property
    def reads(self) -> frozenset[str]:  # type: ignore[override]
        """The candidates' text (their answers), and vectors for the cosine copy test."""
        return frozenset({"text", "vectors"} if self.cosine is not None else {"text"})

    def __init__(self, reader: PassageReader | None = None,
                 equivalence: AnswerEquivalence | None = None, *,
                 weight_factors: Sequence[str] = WEIGHT_FACTORS, floor: float = 0.1,
                 unanswered: float = 1.0, threshold: float = 0.5,
                 on_contested: str = "neutral", jaccard: float = JACCARD,
                 shingle: int = SHINGLE, cosine: float | None = None,
                 name: str = "consensus"):
        if reader is not None and not callable(reader):
            raise ValueError(f"reader: expected a callable (query, passages) -> answers, got "
                             f"{type(reader).__name__}")
        self.reader = reader or extractive_answers
        self.equivalence = equivalence or AnswerEquivalence()
        self.weight_factors = tuple(str(f) for f in weight_factors)
        self.floor = check_probability("floor", floor)
        self.unanswered = check_probability("unanswered", unanswered)
        self.threshold = check_probability("threshold", threshold)
        self.on_contested = check_choice("on_contested", on_contested, ON_CONTESTED)
        self.jaccard = check_probability("jaccard", jaccard)
        self.shingle = check_int("shingle", shingle, 1)
        self.cosine = None if cosine is None else check_probability("cosine", cosine)
        self.name = name

    def weights(self, batch: Candidates) -> tuple[np.ndarray, str]:
        """``w_d = max(sim_d, 0) · Π λ`` and a note naming the factors used."""
        w = np.maximum(batch.retrieval_score, 0.0)
        used = [f for f in self.weight_factors if f in batch.factors]
        for f in used:
            w = w * np.maximum(batch.factors[f], 0.0)
        missing = [f for f in self.weight_factors if f not in batch.factors]
        note = " × ".join(["max(sim, 0)", *used])
        if missing:
            note += f" (absent, taken as 1: {', '.join(missing)})"
        return w, note

    def transform(self, batch: Candidates) -> Candidates:
        n = len(batch)
        if n == 0:
            out = batch.with_factor(self.name, np.zeros(0), 0.0, 1.0)
            return out.with_info(consensus=self._info(NO_ANSWERS, [], 0.0, "", [], False,
                                                      unanswered=0))
        texts = batch.column("text")
        missing = [str(batch.doc_ids[i]) for i in range(n) if not isinstance(texts[i], str)]
        if missing:
            raise StageError(f"consensus: {len(missing)} candidate(s) without text (first: "
                             f"{missing[0]!r}); the stage reads each passage's answer: "
                             "retrieve with text")
        notes = pool_warnings(self.name, n, self.max_pool,
                              "one reader call per passage, then the copy test")
        answers = list(self.reader(batch.query, [str(t) for t in texts]))
        if len(answers) != n:
            raise StageError(f"consensus reader: returned {len(answers)} answers; expected "
                             f"{n} (one per candidate)")
        labels, classes = self.equivalence.classes(
            [a if isinstance(a, str) else None for a in answers])
        if self.cosine is not None and batch.vectors is None:
            raise StageError("consensus: cosine near-duplicate test needs the candidates' "
                             "vectors; retrieve with vectors or drop cosine")
        groups = duplicate_groups([str(t) for t in texts], batch.vectors,
                                  jaccard=self.jaccard, shingle=self.shingle,
                                  cosine=self.cosine)
        w, note = self.weights(batch)
        vote = weighted_vote(classes, groups, w, n_classes=len(labels),
                             threshold=self.threshold)
        applied = vote.status == AGREED or (vote.top is not None
                                            and self.on_contested == "apply")
        f = (consensus_factor(classes, vote, floor=self.floor, unanswered=self.unanswered)
             if applied else np.ones(n))
        ids = [str(d) for d in batch.doc_ids]
        by_class = _members(classes, len(labels))
        competing = [{"answer": labels[c], "share": float(vote.shares[c]),
                      "weight": float(vote.weights[c]),
                      "voices": int(vote.voices[by_class[c]].sum()),
                      "doc_ids": [ids[i] for i in by_class[c]]}
                     for c in np.argsort(-vote.shares, kind="stable") if len(by_class[c])]
        copies = [[ids[i] for i in members]
                  for members in _members(groups, int(groups.max()) + 1) if len(members) > 1]
        info = self._info(vote.status, competing, vote.total_weight, note, copies, applied,
                          unanswered=int(np.count_nonzero(classes < 0)), warnings=notes)
        out = batch.with_factor(self.name, f, 0.0, 1.0)
        out = out.with_meta("answer", [labels[c] if c >= 0 else None for c in classes])
        out = out.with_meta("answer_group", [int(g) for g in groups])
        return out.with_info(consensus=info)

    def _info(self, status: str, competing: list[dict[str, Any]], total: float, note: str,
              copies: list[list[str]], applied: bool, *, unanswered: int,
              warnings: list[str] | None = None) -> dict[str, Any]:
        top = competing[0] if competing and status != NO_ANSWERS else None
        return {"status": status,
                "answer": top["answer"] if top and status == AGREED else None,
                "share": top["share"] if top else None,
                "threshold": self.threshold, "factor_applied": applied,
                "answers": competing, "unanswered": unanswered,
                "total_weight": total, "weights": note, "duplicate_groups": copies,
                "warnings": list(warnings or [])}

    def config(self) -> dict[str, Any]:
        return {"reader": getattr(self.reader, "__name__", type(self.reader).__name__),
                "equivalence": self.equivalence.config(),
                "weight_factors": list(self.weight_factors), "floor": self.floor,
                "unanswered": self.unanswered, "threshold": self.threshold,
                "on_contested": self.on_contested, "jaccard": self.jaccard,
                "shingle": self.shingle, "cosine": self.cosine}
