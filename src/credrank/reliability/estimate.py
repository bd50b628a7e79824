"""Source reliability from cross-source agreement: iterative weighted majority voting (35.3).

For source ``s`` and the calibration queries ``𝒬_res`` with a resolved, non-abstaining
consensus class ``z(q)``, ``J_s = {q ∈ 𝒬_res : A_s(q) ≠ IDK}`` and

    r_s = |{q ∈ J_s : A_s(q) ~ z(q)}| / |J_s|.

The iteration (the paper's IWMV): start from the questions with a strict majority (the top
class holds more than half of the non-abstaining ballots; ``start="plurality"`` relaxes this to
a unique top class), estimate ``r``, set
``v_s = S·r_s − 1``, vote with ``v`` on every question, re-estimate ``r`` and repeat until the
largest change of ``r`` is below ``tol`` (and the set of known sources is unchanged) or
``max_iter`` voting rounds have run.

Declared policies:

* **what "resolved" means** (``𝒬_res``, :func:`resolved_consensus`): the chapter asks to
  "handle unresolved/all-abstaining queries explicitly". A query is in ``𝒬_res`` only when

  - the vote has a winner (at least one non-abstaining ballot);
  - the winner is **not tied**: a tie is unresolved. In every round of the iteration a tied
    query counts for nobody's ``r``; the tie rule of :mod:`credrank.reliability.vote` only
    picks the *answer output* of the final vote (``tied`` marks those answers). Counting a
    tie-broken class as agreement would let the tie rule (the lexicographically smallest
    answer) decide the reliabilities;
  - at least :data:`MIN_BALLOTS` = 2 sources answered it. ``r_s`` is *cross-source*
    agreement with "a resolved non-abstaining consensus answer class": a class backed by the
    scored source's ballot alone is that source, not a consensus, and would let a source
    raise its own ``r`` with questions nobody else answered (a content farm answering its own
    questions). Two ballots are the fewest with which another source can confirm or dispute
    an answer. (Leave-one-out agreement, which scores each source against the vote of the
    others, would also remove the self-vote but replaces the chapter's single ``z(q)`` by one
    consensus per source and query; this estimator keeps the chapter's ``z(q)``.)

  A query outside ``𝒬_res`` keeps the answer of the last vote (``consensus``: the weighted
  vote with the tie rule, or the first unweighted vote when no weighted round ran), if that
  vote gives one; it only does not count in ``J_s``;
* **unknown sources**: ``|J_s| = 0`` (no usable answer on a resolved query). Their
  reliability is not a number: ``known_[s]`` is False, ``reliability_[s]`` holds the
  placeholder :data:`UNKNOWN` (``-1.0``, outside [0, 1] so that accidental use is visible) and
  ``weights_[s]`` is ``0.0`` — an unknown source casts no ballot in the iteration. Outputs
  meant for people (``to_dict``, the CLI) write ``null``.
* the vote's tie and empty rules are those of :mod:`credrank.reliability.vote`;
* agreement is **not** verified truth: :func:`consensus_diagnostics` flags consensuses that
  should not be read as truth.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from credrank.core.validation import (
    check_bool,
    check_choice,
    check_int,
    check_positive,
    check_probability,
)
from credrank.reliability.answers import AnswerTable
from credrank.reliability.equivalence import AnswerEquivalence
from credrank.reliability.vote import START_RULES, majority_matrix, paper_weights, vote_matrix

#: placeholder reliability of an unknown source (never a valid reliability)
UNKNOWN = -1.0
#: fewest answering sources for which agreement can say anything (consensus_diagnostics): one
#: source agrees with itself; two split every disagreement 1–1
MIN_SOURCES = 3
#: fewest non-abstaining ballots for a query to be resolved (in ``𝒬_res``): one ballot is the
#: scored source agreeing with itself
MIN_BALLOTS = 2


@dataclass(frozen=True)
class EncodedAnswers:
    """Answers as an ``(S, Q)`` int matrix of per-question class ids (``-1`` = abstain).

    ``labels[q][c]`` is the representative normalised answer of class ``c`` of question ``q``.
    """

    source_ids: tuple[str, ...]
    question_ids: tuple[str, ...]
    classes: np.ndarray
    labels: tuple[tuple[str, ...], ...]

    def label(self, q: int, c: int) -> str | None:
        return None if c < 0 else self.labels[q][c]


def encode_answers(table: AnswerTable,
                   equivalence: AnswerEquivalence | None = None) -> EncodedAnswers:
    """Encode a table with the equivalence rule: one class id per answer class per question."""
    eq = equivalence or AnswerEquivalence()
    s_count, q_count = table.shape
    classes = np.full((s_count, q_count), -1, dtype=np.int64)
    labels: list[tuple[str, ...]] = []
    # the classes of a question depend only on its distinct answers: encode those once each
    for q, column in enumerate(zip(*table.answers, strict=True)) if s_count else ():
        distinct = list(dict.fromkeys(column))
        labs, ids = eq.classes(distinct)
        classes[:, q] = list(map(dict(zip(distinct, ids.tolist(), strict=True)).__getitem__,
                                 column))
        labels.append(tuple(labs))
    if not s_count:
        labels = [tuple(eq.classes([])[0]) for _ in range(q_count)]
    return EncodedAnswers(table.source_ids, table.question_ids, classes, tuple(labels))


def agreement_rates(classes: np.ndarray,
                    consensus: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bounded agreement estimator ``r_s = |{q ∈ J_s : A_s(q) ~ z(q)}| / |J_s|`` (chapter 35.3).

    ``classes``: ``(S, Q)`` class ids, ``-1`` = abstain; ``consensus``: ``(Q,)`` class ids,
    ``-1`` = unresolved. Returns ``(r, known, n)`` with ``n[s] = |J_s|``; where ``n[s] = 0``
    the source is unknown (``known`` False) and ``r[s] = UNKNOWN`` (division-by-zero policy).
    """
    m = np.asarray(classes)
    z = np.asarray(consensus).reshape(-1)
    if m.ndim != 2 or m.shape[1] != len(z):
        raise ValueError(f"consensus: expected {m.shape[1] if m.ndim == 2 else '?'} entries "
                         f"(one per question), got {len(z)}")
    usable = (m >= 0) & (z >= 0)[None, :]
    n = usable.sum(axis=1)
    agree = (usable & (m == z[None, :])).sum(axis=1)
    known = n > 0
    r = np.where(known, agree / np.maximum(n, 1), UNKNOWN)
    return r, known, n


def resolved_consensus(classes: np.ndarray, consensus: np.ndarray,
                       tied: np.ndarray | None = None) -> np.ndarray:
    """``z(q)`` on ``𝒬_res`` and ``-1`` elsewhere (chapter 35.3; module docstring).

    A query is resolved when ``consensus[q] >= 0``, it is not ``tied`` and at least
    :data:`MIN_BALLOTS` sources gave a non-abstaining answer to it.
    """
    m = np.asarray(classes)
    z = np.asarray(consensus).reshape(-1)
    keep = (z >= 0) & ((m >= 0).sum(axis=0) >= MIN_BALLOTS)
    if tied is not None:
        keep &= ~np.asarray(tied, dtype=bool).reshape(-1)
    return np.where(keep, z, -1)


def iterate_weighted_majority(
    classes: np.ndarray, *, tol: float = 1e-6, max_iter: int = 100, clip: bool = False,
    max_scale: float | None = None, start: str = "majority",
) -> dict[str, Any]:
    """IWMV on an encoded ``(S, Q)`` class matrix (chapter 35.3); the kernel of the estimator.

    ``start`` picks the questions of the first estimate (:func:`~credrank.reliability.vote.
    majority_matrix`): ``"majority"`` (> half of the ballots, default) or ``"plurality"`` (a
    unique top class). Every round's ``r`` counts only the resolved queries
    (:func:`resolved_consensus`: not tied, >= :data:`MIN_BALLOTS` ballots).

    Returns a dict with ``reliability``, ``weights``, ``known``, ``coverage`` (``|J_s|``),
    ``consensus`` (the final vote's class ids, tie rule applied; ``-1`` where nothing was
    resolved or no source answered), ``resolved`` (the queries of ``𝒬_res``), ``tied`` (the
    final vote's answer was picked by the tie rule), ``n_iter`` (weighted voting rounds),
    ``converged`` and ``history`` (max |Δr| per round).
    """
    tol = check_positive("tol", tol)
    max_iter = check_int("max_iter", max_iter, 1)
    check_choice("start", start, START_RULES)
    m = np.asarray(classes, dtype=np.int64)
    if m.ndim != 2:
        raise ValueError(f"classes: expected a 2-D (sources, questions) matrix, got {m.ndim}-D")
    n_sources = m.shape[0]
    if n_sources == 0:
        raise ValueError("classes: expected at least one source (row), got none")
    consensus = majority_matrix(m, rule=start)   # the unweighted first vote
    z = resolved_consensus(m, consensus)
    tied = np.zeros(m.shape[1], dtype=bool)
    r, known, n = agreement_rates(m, z)
    history: list[float] = []
    converged = False
    n_iter = 0
    # nothing resolved at the start: every source stays unknown, no round is run
    while known.any() and not converged and n_iter < max_iter:
        w = np.where(known, paper_weights(np.where(known, r, 0.0), n_sources, clip=clip,
                                          max_scale=max_scale), 0.0)
        consensus, tied = vote_matrix(m, w)
        z = resolved_consensus(m, consensus, tied)
        r_new, known_new, n = agreement_rates(m, z)
        both = known & known_new
        delta = float(np.max(np.abs(r_new[both] - r[both]), initial=0.0))
        same_known = bool(np.array_equal(known, known_new))
        history.append(delta if same_known else 1.0)
        r, known = r_new, known_new
        n_iter += 1
        converged = same_known and delta < tol
    w = np.where(known, paper_weights(np.where(known, r, 0.0), n_sources, clip=clip,
                                      max_scale=max_scale), 0.0)
    return {"reliability": r, "weights": w, "known": known, "coverage": n,
            "consensus": consensus, "resolved": z >= 0, "tied": tied, "n_iter": n_iter,
            "converged": converged, "history": history}


def _as_encoded(answers: Any, equivalence: AnswerEquivalence | None) -> EncodedAnswers:
    if isinstance(answers, EncodedAnswers):
        return answers
    if isinstance(answers, AnswerTable):
        return encode_answers(answers, equivalence)
    if isinstance(answers, Mapping):
        return encode_answers(AnswerTable.from_mapping(answers), equivalence)
    if isinstance(answers, np.ndarray):
        m = answers
        if m.ndim != 2 or not np.issubdtype(m.dtype, np.integer):
            raise ValueError(f"answers: expected a 2-D int matrix of class ids, got dtype "
                             f"{m.dtype} with {m.ndim} dimensions")
        if m.size and m.min() < -1:
            raise ValueError(f"answers: class ids must be >= -1 (-1 = abstain), got {m.min()}")
        n_c = int(m.max(initial=-1)) + 1
        labels = tuple(tuple(str(c) for c in range(n_c)) for _ in range(m.shape[1]))
        return EncodedAnswers(tuple(str(i) for i in range(m.shape[0])),
                              tuple(str(j) for j in range(m.shape[1])), m.astype(np.int64),
                              labels)
    raise TypeError("answers: expected an AnswerTable, a {source: {question: answer}} mapping, "
                    f"EncodedAnswers or an int matrix, got {type(answers).__name__}")


class ReliabilityEstimator:
    """RA-RAG offline reliability estimation by iterative weighted majority voting (35.3).

    Args:
        tol: stop when the largest change of any known ``r_s`` is below ``tol``.
        max_iter: maximum number of weighted voting rounds (>= 1).
        clip: use ``max(v_s, 0)`` instead of the paper's signed ``v_s = S·r_s − 1``.
        max_scale: optional cap on the scaling factor ``S``.
        equivalence: the answer-equivalence rule ``~`` (use the same one for voting).
        start: questions of the first estimate: ``"majority"`` (strict majority, > half of the
            ballots; default) or ``"plurality"`` (unique top class).

    Fitted attributes: ``source_ids_``, ``question_ids_``, ``reliability_`` (``UNKNOWN`` where
    not ``known_``), ``weights_`` (``0`` where unknown), ``known_``, ``coverage_`` (``|J_s|``),
    ``answered_`` (non-abstaining answers), ``consensus_`` (the vote's class id per question,
    ``-1`` where it has none), ``consensus_labels_``, ``resolved_`` (the questions of
    ``𝒬_res``, module docstring), ``tied_`` (answer picked by the tie rule), ``n_iter_``,
    ``converged_``, ``history_``, ``encoded_``.
    """

    def __init__(self, tol: float = 1e-6, max_iter: int = 100, clip: bool = False,
                 max_scale: float | None = None,
                 equivalence: AnswerEquivalence | None = None, start: str = "majority") -> None:
        self.tol = check_positive("tol", tol)
        self.max_iter = check_int("max_iter", max_iter, 1)
        self.max_scale = None if max_scale is None else check_positive("max_scale", max_scale)
        self.start = check_choice("start", start, START_RULES)
        self.clip = check_bool("clip", clip)
        self.equivalence = equivalence or AnswerEquivalence()

    def fit(self, answers: Any) -> ReliabilityEstimator:
        """Estimate reliabilities from an AnswerTable, a ``{source: {question: answer}}``
        mapping, :class:`EncodedAnswers` or an ``(S, Q)`` int matrix of class ids."""
        enc = _as_encoded(answers, self.equivalence)
        if not enc.source_ids:
            raise ValueError("answers: expected at least one source, got none")
        out = iterate_weighted_majority(enc.classes, tol=self.tol, max_iter=self.max_iter,
                                        clip=self.clip, max_scale=self.max_scale,
                                        start=self.start)
        self.encoded_ = enc
        self.source_ids_ = enc.source_ids
        self.question_ids_ = enc.question_ids
        self.reliability_ = out["reliability"]
        self.weights_ = out["weights"]
        self.known_ = out["known"]
        self.coverage_ = out["coverage"]
        self.answered_ = (enc.classes >= 0).sum(axis=1)
        self.consensus_ = out["consensus"]
        self.consensus_labels_ = [enc.label(q, int(c)) for q, c in enumerate(self.consensus_)]
        self.resolved_ = out["resolved"]
        self.tied_ = out["tied"]
        self.n_iter_ = out["n_iter"]
        self.converged_ = out["converged"]
        self.history_ = out["history"]
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "reliability_"):
            raise RuntimeError("ReliabilityEstimator is not fitted; call fit(answers) first")

    def reliability_table(self) -> dict[str, float]:
        """``{source_id: r_s}`` for the known sources only."""
        self._check_fitted()
        return {s: float(r) for s, r, k in zip(self.source_ids_, self.reliability_,
                                               self.known_, strict=True) if k}

    def weight_table(self) -> dict[str, float]:
        """``{source_id: v_s}`` for the known sources only."""
        self._check_fitted()
        return {s: float(v) for s, v, k in zip(self.source_ids_, self.weights_,
                                               self.known_, strict=True) if k}

    def diagnostics(self, **kwargs: Any) -> ConsensusDiagnostics:
        """:func:`consensus_diagnostics` of the fitted consensus."""
        self._check_fitted()
        return consensus_diagnostics(self.encoded_, self.consensus_, self.reliability_,
                                     self.known_, self.coverage_, tied=self.tied_, **kwargs)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable summary (unknown reliabilities as ``None``)."""
        self._check_fitted()
        return {
            "n_sources": len(self.source_ids_),
            "n_questions": len(self.question_ids_),
            "n_iter": int(self.n_iter_),
            "converged": bool(self.converged_),
            "clip": self.clip,
            "start": self.start,
            "tol": self.tol,
            "max_iter": self.max_iter,
            "equivalence": self.equivalence.config(),
            "sources": [
                {"source_id": s, "known": bool(k),
                 "reliability": float(r) if k else None,
                 "weight": float(v) if k else None,
                 "coverage": int(c), "answered": int(a)}
                for s, r, v, k, c, a in zip(self.source_ids_, self.reliability_, self.weights_,
                                            self.known_, self.coverage_, self.answered_,
                                            strict=True)],
            "consensus": dict(zip(self.question_ids_, self.consensus_labels_, strict=True)),
        }


@dataclass(frozen=True)
class ConsensusDiagnostics:
    """Whether an unsupervised consensus may be read as truth, and why not.

    Attributes:
        trustworthy: no warning fired.
        warnings: human-readable reasons.
        resolved_share: share of the questions in ``𝒬_res`` (a consensus that is not a tie and
            has >= :data:`MIN_BALLOTS` ballots, module docstring).
        mean_agreement: coverage-weighted mean ``r`` over known sources.
        top_label_share: share of resolved questions whose consensus is the most common label
            (meaningful when answers come from a shared label set, e.g. helpful/unhelpful).
        shared_label_set: whether at least half of the questions' labels come from one small
            vocabulary of labels that each occur in at least 2 questions and in at least half
            of them (then a dominant consensus label suggests a shared response bias).
        biased_source_share: share of sources (with >= ``min_answers`` answers) that give the
            same label on at least 90% of their answers, checked on every answer set (a source
            that gives one answer to different open questions does not depend on them).
        tie_share: share of the questions with a consensus answer whose final weighted vote
            tied, i.e. whose answer the tie rule picked; such a question is not in ``𝒬_res``
            and counts in no source's ``r``.
        n_sources: sources (ballots, after collapsing copies) with at least one answer.
        too_few_sources: fewer than ``min_sources`` of them answered: agreement needs several
            independent sources, so the consensus is then not trustworthy whatever else holds.
    """

    trustworthy: bool
    warnings: list[str] = field(default_factory=list)
    resolved_share: float = 0.0
    mean_agreement: float | None = None
    top_label_share: float | None = None
    shared_label_set: bool = False
    biased_source_share: float | None = None
    tie_share: float = 0.0
    n_sources: int = 0
    too_few_sources: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"trustworthy": self.trustworthy, "warnings": list(self.warnings),
                "resolved_share": self.resolved_share, "mean_agreement": self.mean_agreement,
                "top_label_share": self.top_label_share,
                "shared_label_set": self.shared_label_set,
                "biased_source_share": self.biased_source_share, "tie_share": self.tie_share,
                "n_sources": self.n_sources, "too_few_sources": self.too_few_sources}


def _shared_label_set(labels: tuple[tuple[str, ...], ...]) -> bool:
    """Whether at least half of the questions draw all their labels from one small vocabulary
    (<= 10 labels, each in >= 2 questions and >= half of them). Needs >= 2 questions: with
    one, every label is "common" to all questions."""
    n_q = len(labels)
    vocab: dict[str, int] = {}
    for labs in labels:
        for lab in labs:
            vocab[lab] = vocab.get(lab, 0) + 1
    common = {lab for lab, c in vocab.items() if c >= max(2, n_q // 2)}
    return 0 < len(common) <= 10 and sum(
        1 for labs in labels if labs and set(labs) <= common) >= n_q / 2


def _biased_share(encoded: EncodedAnswers, min_answers: int) -> float | None:
    """Share of the sources with >= ``min_answers`` answers that give one label on >= 90% of
    them (``None`` when no source has that many)."""
    label_of = [dict(enumerate(labs)) for labs in encoded.labels]
    biased, eligible = 0, 0
    for row in encoded.classes:
        answers = [label_of[q][c] for q, c in enumerate(row.tolist()) if c >= 0]
        if len(answers) < min_answers:
            continue
        eligible += 1
        top = max(answers.count(a) for a in set(answers))
        biased += top >= 0.9 * len(answers)
    return biased / eligible if eligible else None


def consensus_diagnostics(
    encoded: EncodedAnswers, consensus: np.ndarray, reliability: np.ndarray,
    known: np.ndarray, coverage: np.ndarray, *, min_resolved: float = 0.5,
    min_agreement: float = 0.6, max_label_share: float = 0.75, max_biased_sources: float = 0.5,
    min_answers: int = 5, tied: np.ndarray | None = None, min_sources: int = MIN_SOURCES,
    copies: Sequence[Sequence[str]] = (),
) -> ConsensusDiagnostics:
    """Flag an agreement consensus that should not be presented as truth (chapter 35.3).

    "A stable consensus may still be wrong": agreement is evidence of truth only if sources err
    independently. Warnings fire when

    * fewer than ``min_sources`` sources (ballots) answered anything (default
      :data:`MIN_SOURCES` = 3): one source always "agrees" with itself, and with two every
      disagreement is a 1–1 tie that agreement cannot decide, so there is no majority to check
      a source against;
    * fewer than ``min_resolved`` of the questions are resolved (in ``𝒬_res``: a consensus
      that is not a tie and has >= :data:`MIN_BALLOTS` ballots);
    * any final answer was picked by the tie rule (``tied``): the evidence was even there;
    * the coverage-weighted mean agreement ``Σ n_s r_s / Σ n_s`` is below ``min_agreement``;
    * on a shared label set, one label is the consensus on more than ``max_label_share`` of the
      resolved questions (the consensus may be a response bias, not the truth);
    * more than ``max_biased_sources`` of the sources with ``>= min_answers`` answers give one
      label on >= 90% of their answers (answers do not depend on the question; checked with or
      without a shared label set: on open questions it is the mark of a content farm);
    * ``copies``: dependence clusters (the sources of each, by id) that voted as separate
      ballots (the estimate was not collapsed): each copy counts as an independent voice, so a
      farm of copies can outvote the independent sources ("use … source-dependence checks
      before interpreting agreement as truth reliability").

    These are heuristics with declared thresholds, not tests; passing them does not make a
    consensus true.
    """
    for name, value in (("min_resolved", min_resolved), ("min_agreement", min_agreement),
                        ("max_label_share", max_label_share),
                        ("max_biased_sources", max_biased_sources)):
        check_probability(name, value)
    check_int("min_answers", min_answers, 1)
    check_int("min_sources", min_sources, 1)
    z = np.asarray(consensus)
    m = encoded.classes
    n_q = m.shape[1]
    ties = np.zeros(n_q, dtype=bool) if tied is None else np.asarray(tied, dtype=bool)
    warnings: list[str] = []
    n_sources = int((m >= 0).any(axis=1).sum()) if m.size else 0
    too_few = n_sources < min_sources
    if too_few:
        warnings.append(f"only {n_sources} source{'' if n_sources == 1 else 's'} answered "
                        f"(need >= {min_sources}): agreement needs several independent "
                        "sources, so this consensus says nothing about truth")
    resolved = resolved_consensus(m, z, ties) >= 0
    resolved_share = float(resolved.mean()) if n_q else 0.0
    if resolved_share < min_resolved:
        warnings.append(f"only {resolved_share:.0%} of the questions have a consensus "
                        f"(threshold {min_resolved:.0%}; ties and questions with fewer than "
                        f"{MIN_BALLOTS} answers are unresolved)")
    answered = z >= 0
    n_tied = int((ties & answered).sum())
    tie_share = n_tied / int(answered.sum()) if answered.any() else 0.0
    if n_tied:
        warnings.append(f"{n_tied} question{'' if n_tied == 1 else 's'} ended in a tie: the "
                        "answer is the tie rule's (the smallest normalised answer), and the "
                        "question counts in no source's agreement")
    cov = np.asarray(coverage, dtype=np.float64)
    k = np.asarray(known, dtype=bool)
    mean_agreement = None
    if k.any() and cov[k].sum() > 0:
        mean_agreement = float(np.sum(cov[k] * np.asarray(reliability)[k]) / cov[k].sum())
        if mean_agreement < min_agreement:
            warnings.append(f"mean agreement with the consensus is {mean_agreement:.2f} "
                            f"(< {min_agreement:.2f}): sources mostly disagree")
    shared = _shared_label_set(encoded.labels)
    top_share = None
    if resolved.any():
        consensus_labels = [encoded.labels[q][c] for q, c in enumerate(z) if resolved[q]]
        counts: dict[str, int] = {}
        for lab in consensus_labels:
            counts[lab] = counts.get(lab, 0) + 1
        top_label, top_n = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
        top_share = top_n / len(consensus_labels)
        if shared and top_share > max_label_share:
            warnings.append(f"the consensus is {top_label!r} on {top_share:.0%} of the resolved "
                            "questions: agreement may reflect a shared response bias")
    copied = [list(c) for c in copies if len(c) > 1]
    if copied:
        largest = max(copied, key=len)
        warnings.append(f"{sum(len(c) for c in copied)} sources form {len(copied)} dependence "
                        f"cluster{'' if len(copied) == 1 else 's'} (largest: {len(largest)} "
                        f"sources, e.g. {', '.join(largest[:3])}) and voted as separate "
                        "ballots: copies outvote independent sources; estimate again with the "
                        "copies collapsed (--collapse-copies)")
    biased_share = _biased_share(encoded, min_answers)
    if biased_share is not None and biased_share > max_biased_sources:
        warnings.append(f"{biased_share:.0%} of the sources with >= {min_answers} "
                        "answers give the same label on >= 90% of them")
    return ConsensusDiagnostics(
        trustworthy=not warnings, warnings=warnings, resolved_share=resolved_share,
        mean_agreement=mean_agreement, top_label_share=top_share, shared_label_set=shared,
        biased_source_share=biased_share, tie_share=tie_share, n_sources=n_sources,
        too_few_sources=too_few)
