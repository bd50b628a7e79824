"""``AnswerConsensus``: label-free answer consensus over one query's candidates (chapter 35.3).

For a question-style query the stage

1. reads each candidate passage's answer with a *passage reader*
   (:mod:`credrank.consensus.readers`; default
   :func:`~credrank.consensus.readers.extractive_answers`, the offline
   :class:`~credrank.generate.llm.ExtractiveReader` on that passage alone;
   :func:`~credrank.consensus.readers.generator_answers` puts any
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
answer) and its duplicate group in ``answer_group``.

**Bounded reading** (issue 26, item 4). The reader and the copy test cost ``O(N)`` in the
text read, so on a large pool the stage reads only the ``max_read`` candidates (default
:data:`MAX_READ`) of largest vote weight ``w_d`` — the ones whose voices carry the vote — and
counts the others as passages without an answer (factor ``unanswered``; they cast no vote).
Below ``max_read`` candidates nothing changes; ``max_read: null`` reads every passage. The
number read and left out is in ``info["consensus"]`` (``read``, ``not_read``). A pool read
beyond :attr:`AnswerConsensus.max_pool` still runs, with a
:class:`~credrank.select.budget.PoolSizeWarning` and the same sentence in
``info["consensus"]["warnings"]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from credrank.consensus.duplicates import JACCARD, SHINGLE, duplicate_groups
from credrank.consensus.readers import PassageReader, extractive_answers
from credrank.consensus.vote import AGREED, NO_ANSWERS, consensus_factor, weighted_vote
from credrank.core.candidates import Candidates, StageError
from credrank.core.checkpoint import checkpoint
from credrank.core.params import construct, parameters
from credrank.core.pipeline import BuildContext, Stage
from credrank.core.schema import Integer, ListOf, Nullable, Number, Text
from credrank.reliability.equivalence import AnswerEquivalence
from credrank.select.budget import pool_warnings

WEIGHT_FACTORS = ("prior", "credibility", "reliability")
#: the candidates read by default: the ``MAX_READ`` of largest vote weight (module docstring)
MAX_READ = 100
ON_CONTESTED = ("neutral", "apply")


def read_rows(weights: np.ndarray, max_read: int | None) -> np.ndarray:
    """The rows the reader reads, ascending: all of them, or the ``max_read`` of largest vote
    weight (ties: the earlier row)."""
    n = len(weights)
    if max_read is None or n <= max_read:
        return np.arange(n)
    order = np.argsort(-np.asarray(weights, dtype=np.float64), kind="stable")
    return np.sort(order[:max_read])


def _renumber(read: np.ndarray, found: np.ndarray, n: int) -> np.ndarray:
    """Duplicate groups over all ``n`` rows: the read rows' groups ``found`` (numbered over
    the read rows) renumbered in row order, every row not read a group of its own."""
    groups = np.full(n, -1, dtype=np.int64)
    groups[read] = found
    out = np.empty(n, dtype=np.int64)
    seen: dict[int, int] = {}
    for i in range(n):
        g = int(groups[i])
        key = g if g >= 0 else -(i + 1)
        if key not in seen:
            seen[key] = len(seen)
        out[i] = seen[key]
    return out


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
        max_read: the candidates read, those of largest vote weight (``None``: all).
        name: the factor's name.
    """

    #: a vote counts each document once (passages of one page are one voice)
    counts_documents = True

    #: the largest pool handled within the budget: the reader is ``O(N)`` (one passage at a
    #: time), the copy test ``O(W log W)`` plus its candidate pairs (prefix filtering)
    max_pool = 5_000

    def formula_term(self) -> str:
        return "needs the Python path (it reads each candidate's answer)"

    @classmethod
    def from_spec(cls, params: dict[str, Any], ctx: BuildContext) -> AnswerConsensus:
        """The stage of ``params``; over an index (``ctx.store``) it reads the text of the
        ``max_read`` candidates it reads from the index instead of having the retriever
        return every candidate's text."""
        stage = construct(cls, params)
        if callable(getattr(ctx.store, "read_payloads", None)):
            stage.text_store = ctx.store
        return stage

    @property
    def reads(self) -> frozenset[str]:  # type: ignore[override]
        """The candidates' text (their answers) — unless the stage reads it from the index
        itself (:meth:`from_spec`) — and vectors for the cosine copy test."""
        out = {"vectors"} if self.cosine is not None else set()
        if self.text_store is None:
            out.add("text")
        return frozenset(out)

    @parameters(threshold=Number(0.0, 1.0), floor=Number(0.0, 1.0),
                unanswered=Number(0.0, 1.0), on_contested=Text(choices=ON_CONTESTED),
                jaccard=Number(0.0, 1.0), shingle=Integer(1, 64),
                cosine=Nullable(Number(0.0, 1.0)), weight_factors=ListOf(Text()),
                max_read=Nullable(Integer(1, 1_000_000)))
    def __init__(self, reader: PassageReader | None = None,
                 equivalence: AnswerEquivalence | None = None, *,
                 weight_factors: Sequence[str] = WEIGHT_FACTORS, floor: float = 0.1,
                 unanswered: float = 1.0, threshold: float = 0.5,
                 on_contested: str = "neutral", jaccard: float = JACCARD,
                 shingle: int = SHINGLE, cosine: float | None = None,
                 max_read: int | None = MAX_READ, name: str = "consensus"):
        if reader is not None and not callable(reader):
            raise ValueError(f"reader: expected a callable (query, passages) -> answers, got "
                             f"{type(reader).__name__}")
        self.reader = reader or extractive_answers
        self.equivalence = equivalence or AnswerEquivalence()
        self.weight_factors = tuple(weight_factors)
        self.floor, self.unanswered, self.threshold = floor, unanswered, threshold
        self.on_contested, self.jaccard, self.shingle = on_contested, jaccard, shingle
        self.cosine, self.max_read = cosine, max_read
        self.name = name
        #: a store the text of the candidates read comes from when the batch lacks it
        self.text_store: Any = None

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
        w, note = self.weights(batch)
        read = read_rows(w, self.max_read)
        texts = self._texts(batch, read)
        missing = [str(batch.doc_ids[i]) for i in read if not isinstance(texts[i], str)]
        if missing:
            raise StageError(f"consensus: {len(missing)} candidate(s) without text (first: "
                             f"{missing[0]!r}); the stage reads each passage's answer: "
                             "retrieve with text")
        notes = pool_warnings(self.name, len(read), self.max_pool,
                              "one reader call per passage, then the copy test")
        read_texts = [str(texts[i]) for i in read]
        answers_read = list(self.reader(batch.query, read_texts))
        checkpoint("consensus")  # a cancelled request stops before the pairwise tests
        if len(answers_read) != len(read):
            raise StageError(f"consensus reader: returned {len(answers_read)} answers; "
                             f"expected {len(read)} (one per candidate read)")
        answers: list[str | None] = [None] * n
        for i, a in zip(read.tolist(), answers_read, strict=True):
            answers[i] = a if isinstance(a, str) else None
        labels, classes = self.equivalence.classes(answers)
        checkpoint("consensus")
        if self.cosine is not None and batch.vectors is None:
            raise StageError("consensus: cosine near-duplicate test needs the candidates' "
                             "vectors; retrieve with vectors or drop cosine")
        groups = np.arange(n, dtype=np.int64)  # a passage not read is a voice of its own
        if len(read):
            found = duplicate_groups(read_texts, None if batch.vectors is None
                                     else batch.vectors[read], jaccard=self.jaccard,
                                     shingle=self.shingle, cosine=self.cosine)
            groups = _renumber(read, np.asarray(found, dtype=np.int64), n)
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
                          unanswered=int(np.count_nonzero(classes < 0)), warnings=notes,
                          tied=vote.tied)
        info.update(read=len(read), not_read=n - len(read), max_read=self.max_read)
        out = batch.with_factor(self.name, f, 0.0, 1.0)
        out = out.with_meta("answer", [labels[c] if c >= 0 else None for c in classes])
        out = out.with_meta("answer_group", [int(g) for g in groups])
        return out.with_info(consensus=info)

    def _texts(self, batch: Candidates, read: np.ndarray) -> list[Any]:
        """The batch's text column, completed from :attr:`text_store` for the rows ``read``
        that lack it (one read of those documents only)."""
        texts = list(batch.column("text"))
        need = [int(i) for i in read if not isinstance(texts[i], str)]
        if need and self.text_store is not None:
            ids = [str(batch.doc_ids[i]) for i in need]
            found = {str(r["doc_id"]): r.get("text")
                     for r in self.text_store.read_payloads(ids, fields=("doc_id", "text"))}
            for i, doc_id in zip(need, ids, strict=True):
                texts[i] = found.get(doc_id)
        return texts

    def _info(self, status: str, competing: list[dict[str, Any]], total: float, note: str,
              copies: list[list[str]], applied: bool, *, unanswered: int,
              warnings: list[str] | None = None, tied: bool = False) -> dict[str, Any]:
        top = competing[0] if competing and status != NO_ANSWERS else None
        return {"status": status,
                "answer": top["answer"] if top and status == AGREED else None,
                "share": top["share"] if top else None, "tied": tied,
                "threshold": self.threshold, "factor_applied": applied,
                "answers": competing, "unanswered": unanswered,
                "total_weight": total, "weights": note, "duplicate_groups": copies,
                "warnings": list(warnings or [])}

    def config(self) -> dict[str, Any]:
        return {"reader": getattr(self.reader, "__name__", type(self.reader).__name__),
                "equivalence": self.equivalence.config(), **super().config()}
