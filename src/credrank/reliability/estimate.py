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

from collections.abc import Mapping
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


def iterate_weighted_majority(
    classes: np.ndarray, *, tol: float = 1e-6, max_iter: int = 100, clip: bool = False,
    max_scale: float | None = None, start: str = "majority",
) -> dict[str, Any]:
    """IWMV on an encoded ``(S, Q)`` class matrix (chapter 35.3); the kernel of the estimator.

    ``start`` picks the questions of the first estimate (:func:`~credrank.reliability.vote.
    majority_matrix`): ``"majority"`` (> half of the ballots, default), ``"plurality"`` (a
    unique top class) or ``"all"``.

    Returns a dict with ``reliability``, ``weights``, ``known``, ``coverage`` (``|J_s|``),
    ``consensus`` (class ids, ``-1`` unresolved), ``tied`` (consensus picked by the tie rule),
    ``n_iter`` (weighted voting rounds), ``converged`` and ``history`` (max |Δr| per round).
    """
    tol = check_positive("tol", tol)
    max_iter = check_int("max_iter", max_iter, 1)
    m = np.asarray(classes, dtype=np.int64)
    if m.ndim != 2:
        raise ValueError(f"classes: expected a 2-D (sources, questions) matrix, got {m.ndim}-D")
    n_sources = m.shape[0]
    consensus = majority_matrix(m, rule=start)
    tied = np.zeros(m.shape[1], dtype=bool)
    r, known, n = agreement_rates(m, consensus)
    history: list[float] = []
    converged = False
    n_iter = 0
    # nothing resolved by a strict majority: every source stays unknown, no round is run
    while known.any() and not converged and n_iter < max_iter:
        w = np.where(known, paper_weights(np.where(known, r, 0.0), n_sources, clip=clip,
                                          max_scale=max_scale), 0.0)
        consensus, tied = vote_matrix(m, w)
        r_new, known_new, n = agreement_rates(m, consensus)
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
            "consensus": consensus, "tied": tied, "n_iter": n_iter, "converged": converged,
            "history": history}


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
            ballots; default), ``"plurality"`` (unique top class) or ``"all"``.

    Fitted attributes: ``source_ids_``, ``question_ids_``, ``reliability_`` (``UNKNOWN`` where
    not ``known_``), ``weights_`` (``0`` where unknown), ``known_``, ``coverage_`` (``|J_s|``),
    ``answered_`` (non-abstaining answers), ``consensus_`` (class id per question, ``-1``
    unresolved), ``consensus_labels_``, ``tied_``, ``n_iter_``, ``converged_``, ``history_``,
    ``encoded_``.
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
        resolved_share: share of questions with a consensus.
        mean_agreement: coverage-weighted mean ``r`` over known sources.
        top_label_share: share of resolved questions whose consensus is the most common label
            (meaningful when answers come from a shared label set, e.g. helpful/unhelpful).
        shared_label_set: whether at least half of the questions' labels come from one small
            vocabulary (then a dominant consensus label suggests a shared response bias).
        biased_source_share: share of sources (with >= ``min_answers`` answers) that give the
            same label on at least 90% of their answers.
        tie_share: share of resolved questions decided by the tie rule.
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


def consensus_diagnostics(
    encoded: EncodedAnswers, consensus: np.ndarray, reliability: np.ndarray,
    known: np.ndarray, coverage: np.ndarray, *, min_resolved: float = 0.5,
    min_agreement: float = 0.6, max_label_share: float = 0.75, max_biased_sources: float = 0.5,
    min_answers: int = 5, tied: np.ndarray | None = None, min_sources: int = MIN_SOURCES,
) -> ConsensusDiagnostics:
    """Flag an agreement consensus that should not be presented as truth (chapter 35.3).

    "A stable consensus may still be wrong": agreement is evidence of truth only if sources err
    independently. Warnings fire when

    * fewer than ``min_sources`` sources (ballots) answered anything (default
      :data:`MIN_SOURCES` = 3): one source always "agrees" with itself, and with two every
      disagreement is a 1–1 tie that agreement cannot decide, so there is no majority to check
      a source against;
    * fewer than ``min_resolved`` of the questions are resolved;
    * the coverage-weighted mean agreement ``Σ n_s r_s / Σ n_s`` is below ``min_agreement``;
    * on a shared label set, one label is the consensus on more than ``max_label_share`` of the
      resolved questions (the consensus may be a response bias, not the truth);
    * more than ``max_biased_sources`` of the sources with ``>= min_answers`` answers give one
      label on >= 90% of their answers (answers do not depend on the question).

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
    warnings: list[str] = []
    n_sources = int((m >= 0).any(axis=1).sum()) if m.size else 0
    too_few = n_sources < min_sources
    if too_few:
        warnings.append(f"only {n_sources} source{'' if n_sources == 1 else 's'} answered "
                        f"(need >= {min_sources}): agreement needs several independent "
                        "sources, so this consensus says nothing about truth")
    resolved = z >= 0
    resolved_share = float(resolved.mean()) if n_q else 0.0
    if resolved_share < min_resolved:
        warnings.append(f"only {resolved_share:.0%} of the questions have a consensus "
                        f"(threshold {min_resolved:.0%})")
    cov = np.asarray(coverage, dtype=np.float64)
    k = np.asarray(known, dtype=bool)
    mean_agreement = None
    if k.any() and cov[k].sum() > 0:
        mean_agreement = float(np.sum(cov[k] * np.asarray(reliability)[k]) / cov[k].sum())
        if mean_agreement < min_agreement:
            warnings.append(f"mean agreement with the consensus is {mean_agreement:.2f} "
                            f"(< {min_agreement:.2f}): sources mostly disagree")
    vocab: dict[str, int] = {}
    for labs in encoded.labels:
        for lab in labs:
            vocab[lab] = vocab.get(lab, 0) + 1
    common = {lab for lab, c in vocab.items() if c >= max(1, n_q // 2)}
    shared = bool(n_q) and 0 < len(common) <= 10 and sum(
        1 for labs in encoded.labels if labs and set(labs) <= common) >= n_q / 2
    top_share = None
    if resolved.any():
        consensus_labels = [encoded.labels[q][c] for q, c in enumerate(z) if c >= 0]
        counts: dict[str, int] = {}
        for lab in consensus_labels:
            counts[lab] = counts.get(lab, 0) + 1
        top_label, top_n = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
        top_share = top_n / len(consensus_labels)
        if shared and top_share > max_label_share:
            warnings.append(f"the consensus is {top_label!r} on {top_share:.0%} of the resolved "
                            "questions: agreement may reflect a shared response bias")
    biased_share = None
    if shared:
        label_of = [dict(enumerate(labs)) for labs in encoded.labels]
        biased, eligible = 0, 0
        for s in range(m.shape[0]):
            answers = [label_of[q][c] for q, c in enumerate(m[s]) if c >= 0]
            if len(answers) < min_answers:
                continue
            eligible += 1
            top = max(answers.count(a) for a in set(answers))
            biased += top >= 0.9 * len(answers)
        if eligible:
            biased_share = biased / eligible
            if biased_share > max_biased_sources:
                warnings.append(f"{biased_share:.0%} of the sources with >= {min_answers} "
                                "answers give the same label on >= 90% of them")
    tie_share = float(np.asarray(tied)[resolved].mean()) if tied is not None and \
        resolved.any() else 0.0
    return ConsensusDiagnostics(
        trustworthy=not warnings, warnings=warnings, resolved_share=resolved_share,
        mean_agreement=mean_agreement, top_label_share=top_share, shared_label_set=shared,
        biased_source_share=biased_share, tie_share=tie_share, n_sources=n_sources,
        too_few_sources=too_few)
